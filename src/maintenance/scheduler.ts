/**
 * Periodic maintenance run by worker processes: the sweep, on the cron schedule of
 * SWEEP_CRON in UTC (03:00 every night by default). The sweep's lock (sweepExclusive) makes
 * one runner at a time across processes, `tributary sweep` included.
 */
import { Cron } from 'croner';
import type { Deps } from '../deps.ts';
import { sweepExclusive } from './sweep.ts';
import { timerDelay } from '../datetime.ts';

export interface Scheduler {
  stop(): Promise<void>;
}

/** The first instant of the schedule strictly after `now` (config.ts has checked that one exists). */
export function nextRunAfter(cron: string, now: Date): Date {
  const next = new Cron(cron, { timezone: 'UTC', mode: '5-part' }).nextRun(now);
  if (next === null) throw new Error(`the cron expression "${cron}" names no future instant`);
  return next;
}

/** One scheduled sweep; false when another process was sweeping (it then skips this run). */
export async function sweepOnce(deps: Deps): Promise<boolean> {
  const result = await sweepExclusive(deps.db, {
    now: new Date(deps.clock()),
    guardDays: deps.config.deliveryGuardDays,
    runRetentionDays: deps.config.runRetentionDays,
  });
  if (result) deps.log.info({ sweep: result }, 'nightly sweep done');
  return result !== undefined;
}

export function startScheduler(deps: Deps): Scheduler {
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<unknown> = Promise.resolve();
  let stopped = false;
  const arm = () => {
    if (stopped) return;
    const due = nextRunAfter(deps.config.sweepCron, new Date(deps.clock()));
    const wait = () => {
      if (stopped) return;
      // A far schedule (yearly, say) is waited for in steps; each step checks the clock again.
      const now = new Date(deps.clock());
      if (due.getTime() > now.getTime()) {
        timer = setTimeout(wait, timerDelay(due, now));
        timer.unref();
        return;
      }
      running = sweepOnce(deps)
        .catch((err) => deps.log.error({ err }, 'sweep failed'))
        .finally(arm);
    };
    wait();
  };
  arm();
  return {
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}
