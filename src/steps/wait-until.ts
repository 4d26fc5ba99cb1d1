/** wait_until: the run parks until an ISO-8601 instant (with its offset), holding nothing; an instant already past goes on at once. */
import type { WaitUntilStep } from '../db/tables.ts';
import { parseDateTime } from '../datetime.ts';
import { permanentFailure } from '../errors.ts';
import { checked, ConfigIssue, expression, onlyMembers } from './config.ts';
import { evaluateOne, type StepType } from './step.ts';
import { literalOf, resumeTimeWait, waitUntil } from './waits.ts';

const NOT_AN_INSTANT = 'must give an ISO-8601 instant with its offset, such as "2026-07-01T09:00:00Z"';

export const waitUntilStep: StepType<WaitUntilStep['config']> = {
  type: 'wait_until',
  parks: true,
  checkpoint: 'with-next',
  validate: (config) =>
    checked(() => {
      onlyMembers(config, ['at'], '', "a wait_until step's config");
      const at = expression(config, 'at', '', true)!;
      const lit = literalOf(at);
      if (lit !== undefined && (typeof lit.value !== 'string' || parseDateTime(lit.value) === undefined)) throw new ConfigIssue('/at', `at ${NOT_AN_INSTANT}`);
      return { at };
    }),
  run: async (config, ctx, effects) => {
    if (ctx.parked) return resumeTimeWait(ctx, ctx.parked.state);
    const v = await evaluateOne(ctx, config.at);
    const at = typeof v === 'string' ? parseDateTime(v) : undefined;
    if (at === undefined) throw permanentFailure(`at ${NOT_AN_INSTANT} (it gave ${JSON.stringify(v) ?? 'nothing'})`);
    return waitUntil(ctx, effects, 'wait_until', at);
  },
  describe: (config) => ({ expressions: [['at', config.at]] }),
};
