/**
 * wait_for_delivery: the run parks until a later delivery accepted on `trigger` (a webhook
 * trigger of the same workflow) whose `match` is true, or until `timeout`; the matched
 * delivery's payload is its output, and that delivery starts no run of its own
 * (runs/delivery-waits.ts). On timeout: `fail` (the default) fails the step for good,
 * `continue` gives output null.
 */
import type { OnTimeout, WaitForDeliveryStep } from '../db/tables.ts';
import { permanentFailure } from '../errors.ts';
import { checked, ConfigIssue, expression, onlyMembers, text } from './config.ts';
import type { StepType } from './step.ts';
import { durationMs, MAX_WAIT_SECONDS } from './waits.ts';

export const ON_TIMEOUT: readonly OnTimeout[] = ['fail', 'continue'];

/** What a parked wait_for_delivery saved: when it times out. */
interface DeliveryWaitState {
  timeout_at: string;
}

function timedOut(config: WaitForDeliveryStep['config']) {
  if ((config.on_timeout ?? 'fail') === 'continue') return { output: null };
  throw permanentFailure(`No delivery on trigger ${config.trigger} matched within ${String(config.timeout)}`);
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
      if (Array.isArray(onTimeout))
        throw new ConfigIssue('/on_timeout', 'on_timeout takes "fail" or "continue" in this release (a list of steps comes with nested steps)');
      if (onTimeout !== undefined && onTimeout !== null && !ON_TIMEOUT.includes(onTimeout as OnTimeout))
        throw new ConfigIssue('/on_timeout', 'on_timeout must be "fail" or "continue"');
      return {
        trigger,
        ...(match === null ? {} : { match }),
        timeout,
        ...(onTimeout === undefined || onTimeout === null ? {} : { on_timeout: onTimeout as OnTimeout }),
      };
    }),
  run: async (config, ctx, effects) => {
    const delivery = { trigger: config.trigger, match: config.match ?? null };
    if (ctx.parked) {
      if (ctx.parked.delivery) return { output: ctx.parked.delivery.payload };
      const timeoutAt = Date.parse((ctx.parked.state as DeliveryWaitState | null)?.timeout_at ?? '');
      if (Number.isNaN(timeoutAt)) throw permanentFailure('The wait was resumed without its timeout');
      // Woken before its time with no delivery (it should not be): it waits on.
      if (timeoutAt > ctx.clock()) return { output: null, park: { resumeAt: new Date(timeoutAt), state: ctx.parked.state, delivery } };
      return timedOut(config);
    }
    const until = new Date(ctx.clock() + (durationMs(config.timeout) as number));
    const answer = await effects.wait({ key: ctx.key, kind: 'wait_for_delivery', until, delivery });
    if (!answer.park) return answer.delivery ? { output: answer.delivery.payload } : timedOut(config);
    const state: DeliveryWaitState = { timeout_at: until.toISOString() };
    return { output: null, park: { resumeAt: until, state, delivery } };
  },
  describe: (config) => ({ expressions: config.match === undefined ? [] : [['match', config.match]] }),
};
