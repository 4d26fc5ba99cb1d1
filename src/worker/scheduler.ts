/**
 * Periodic maintenance run by worker processes: the sweep, on the cron schedule of
 * SWEEP_CRON in UTC (03:00 every night by default). A session-level advisory lock makes one
 * runner at a time across processes.
 */
import { Cron } from 'croner';
import { sql } from 'kysely';
import type { Deps } from '../deps.ts';
import { sweep } from '../admin/sweep.ts';

export interface Scheduler {
  stop(): Promise<void>;
}

const SWEEP_LOCK = 7311;

/** Node's timers take at most this many milliseconds (about 24.8 days); a longer wait is done in steps. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** The first instant of the schedule strictly after `now` (config.ts has checked that one exists). */
export function nextRunAfter(cron: string, now: Date): Date {
  const next = new Cron(cron, { timezone: 'UTC', mode: '5-part' }).nextRun(now);
  if (next === null) throw new Error(`the cron expression "${cron}" names no future instant`);
  return next;
}

/** How long to sleep before looking again: until `due`, in steps a timer can take. */
export function timerDelay(due: Date, now: Date): number {
  return Math.max(0, Math.min(MAX_TIMER_MS, due.getTime() - now.getTime()));
}

export async function sweepOnce(deps: Deps): Promise<boolean> {
  // One connection holds a session lock for the sweep's duration (others skip this night),
  // while the sweep commits batch by batch on it: one long transaction would hold every
  // deleted row's lock until the end.
  return deps.db.connection().execute(async (conn) => {
    const { rows } = await sql<{ locked: boolean }>`select pg_try_advisory_lock(${SWEEP_LOCK}) as locked`.execute(conn);
    if (!rows[0]?.locked) return false;
    try {
      const result = await sweep({ db: conn });
      deps.log.info({ sweep: result }, 'nightly sweep done');
      return true;
    } finally {
      await sql`select pg_advisory_unlock(${SWEEP_LOCK})`.execute(conn);
    }
  });
}

export function startScheduler(deps: Deps): Scheduler {
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<unknown> = Promise.resolve();
  let stopped = false;
  const arm = () => {
    if (stopped) return;
    const due = nextRunAfter(deps.config.sweepCron, new Date());
    const wait = () => {
      if (stopped) return;
      // A far schedule (yearly, say) is waited for in steps; each step checks the clock again.
      if (due.getTime() > Date.now()) {
        timer = setTimeout(wait, timerDelay(due, new Date()));
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
