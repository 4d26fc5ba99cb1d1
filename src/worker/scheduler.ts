/**
 * Periodic maintenance run by worker processes: the nightly sweep (03:00 UTC by default).
 * A session-level advisory lock makes one runner at a time across processes.
 */
import { sql } from 'kysely';
import type { Deps } from '../deps.ts';
import { sweep } from '../admin/sweep.ts';

export interface Scheduler {
  stop(): Promise<void>;
}

const SWEEP_LOCK = 7311;

/** Milliseconds until the next hh:mm UTC after `now`. */
export function msUntilNextUtc(now: Date, hour: number, minute: number): number {
  const next = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate(), hour, minute));
  if (next.getTime() <= now.getTime()) next.setUTCDate(next.getUTCDate() + 1);
  return next.getTime() - now.getTime();
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
  const { hour, minute } = deps.config.sweepAt;
  const arm = () => {
    timer = setTimeout(() => {
      running = sweepOnce(deps).catch((err) => deps.log.error({ err }, 'nightly sweep failed')).finally(arm);
    }, msUntilNextUtc(new Date(), hour, minute));
    timer.unref();
  };
  arm();
  return {
    async stop() {
      clearTimeout(timer);
      await running;
    },
  };
}
