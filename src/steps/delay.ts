/** delay: the run parks for a duration ("10m", "1h30m", "PT10M", a number of seconds), holding nothing; its output is {until}. */
import type { DelayStep } from '../db/tables.ts';
import { permanentFailure } from '../errors.ts';
import { checked, expression, onlyMembers } from './config.ts';
import { evaluateOne, type StepType } from './step.ts';
import { checkLiteralDuration, durationMs, resumeTimeWait, waitUntil } from './waits.ts';

export const delay: StepType<DelayStep['config']> = {
  type: 'delay',
  parks: true,
  // Safe to run again: a resumed delay gives its output from the checkpoint's instant.
  checkpoint: 'with-next',
  validate: (config) =>
    checked(() => {
      onlyMembers(config, ['duration'], '', "a delay step's config");
      const duration = expression(config, 'duration', '', true)!;
      checkLiteralDuration(duration, '/duration');
      return { duration };
    }),
  run: async (config, ctx, effects) => {
    if (ctx.parked) return resumeTimeWait(ctx, ctx.parked.state);
    const ms = durationMs(await evaluateOne(ctx, config.duration));
    if (typeof ms === 'string') throw permanentFailure(`duration: ${ms}`);
    return waitUntil(ctx, effects, 'delay', new Date(ctx.clock() + ms));
  },
  describe: (config) => ({ expressions: [['duration', config.duration]] }),
};
