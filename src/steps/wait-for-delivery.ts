/**
 * wait_for_delivery: the run parks until a later delivery accepted on `trigger` (a webhook
 * trigger of the same workflow) whose `match` is true, or until `timeout`; the matched
 * delivery's payload is its output, and that delivery starts no run of its own
 * (runs/delivery-waits.ts). On timeout: `fail` (the default) fails the step for good,
 * `continue` gives output null, a list of steps runs them nested (as a switch's branch) and
 * gives the output of the last one.
 */
import type { OnTimeout, StepRecord, WaitForDeliveryStep } from '../db/tables.ts';
import { permanentFailure } from '../errors.ts';
import { checked, ConfigIssue, expression, onlyMembers, text } from './config.ts';
import type { StepContext, StepResult, StepType } from './step.ts';
import { stepList } from './switch.ts';
import { durationMs, MAX_WAIT_SECONDS } from './waits.ts';

export const ON_TIMEOUT: readonly OnTimeout[] = ['fail', 'continue'];

/** What a parked wait_for_delivery saved: when it times out. */
interface DeliveryWaitState {
  timeout_at: string;
}

/** Kept with the checkpoint once the timeout came first: a later attempt (or a wait among the steps) goes on with the on_timeout steps. */
interface TimedOut {
  timed_out: true;
}

async function timedOut(config: WaitForDeliveryStep['config'], ctx: StepContext): Promise<StepResult> {
  const onTimeout = config.on_timeout ?? 'fail';
  if (onTimeout === 'continue') return { output: null };
  if (onTimeout === 'fail') throw permanentFailure(`No delivery on trigger ${config.trigger} matched within ${String(config.timeout)}`);
  if (!ctx.nested) throw new Error('on_timeout steps run only in the executor');
  ctx.noteProgress?.({ timed_out: true } satisfies TimedOut);
  const into: StepRecord[] = [];
  if (ctx.record) ctx.record.steps = into;
  const r = await ctx.nested.list(onTimeout, { into, input: { ...ctx.input, steps: { ...ctx.input.steps } }, prefix: '', span: ctx.span });
  return { output: r.output ?? null };
}

export const waitForDelivery: StepType<WaitForDeliveryStep['config']> = {
  type: 'wait_for_delivery',
  parks: true,
  checkpoint: 'with-next',
  validate: (config) =>
    checked(() => {
      onlyMembers(config, ['trigger', 'match', 'timeout', 'on_timeout'], '', "a wait_for_delivery step's config");
      // Which triggers the workflow has is checked with the rest of the definition (workflows/definition.ts).
      const trigger = text(config, 'trigger', '', { required: true, max: 63 })!;
      const match = expression(config, 'match', '', false);
      const timeout = config.timeout;
      if (timeout === undefined || timeout === null)
        throw new ConfigIssue('/timeout', `timeout is required (a duration such as "1h", at most ${MAX_WAIT_SECONDS / 86_400} days)`);
      if (typeof timeout !== 'string' && typeof timeout !== 'number')
        throw new ConfigIssue('/timeout', 'timeout must be a duration such as "1h" or a number of seconds');
      const ms = durationMs(timeout);
      if (typeof ms === 'string') throw new ConfigIssue('/timeout', `timeout: ${ms}`);
      const onTimeout = config.on_timeout;
      // A list's steps are checked by the definition, which knows the tree (describe().lists).
      if (Array.isArray(onTimeout)) return { trigger, ...(match === null ? {} : { match }), timeout, on_timeout: stepList(config, 'on_timeout', '', true) };
      if (onTimeout !== undefined && onTimeout !== null && !ON_TIMEOUT.includes(onTimeout as OnTimeout))
        throw new ConfigIssue('/on_timeout', 'on_timeout must be "fail", "continue" or a list of steps');
      return {
        trigger,
        ...(match === null ? {} : { match }),
        timeout,
        ...(onTimeout === undefined || onTimeout === null ? {} : { on_timeout: onTimeout as OnTimeout }),
      };
    }),
  run: async (config, ctx, effects) => {
    const delivery = { trigger: config.trigger, match: config.match ?? null };
    // Timed out at an earlier attempt (or before a wait among its on_timeout steps parked): its steps go on.
    if ((ctx.progress as TimedOut | undefined)?.timed_out === true) return timedOut(config, ctx);
    if (ctx.parked) {
      if (ctx.parked.delivery) return { output: ctx.parked.delivery.payload };
      const timeoutAt = Date.parse((ctx.parked.state as DeliveryWaitState | null)?.timeout_at ?? '');
      if (Number.isNaN(timeoutAt)) throw permanentFailure('The wait was resumed without its timeout');
      // Woken before its time with no delivery (it should not be): it waits on.
      if (timeoutAt > ctx.clock()) return { output: null, park: { resumeAt: new Date(timeoutAt), state: ctx.parked.state, delivery } };
      return timedOut(config, ctx);
    }
    const until = new Date(ctx.clock() + (durationMs(config.timeout) as number));
    const answer = await effects.wait({ key: ctx.key, kind: 'wait_for_delivery', until, delivery });
    if (!answer.park) return answer.delivery ? { output: answer.delivery.payload } : timedOut(config, ctx);
    const state: DeliveryWaitState = { timeout_at: until.toISOString() };
    return { output: null, park: { resumeAt: until, state, delivery } };
  },
  describe: (config) => ({
    expressions: config.match === undefined ? [] : [['match', config.match]],
    // One path of two: the steps after the wait do not read inside it, as after a switch.
    ...(Array.isArray(config.on_timeout) ? { lists: [{ pointer: 'on_timeout', steps: config.on_timeout, kind: 'branch' as const }] } : {}),
  }),
};
