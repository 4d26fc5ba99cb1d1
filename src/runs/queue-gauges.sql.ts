import { sql } from 'kysely';
import type { Db } from '../db/connect.ts';
import { heldByConcurrency } from './queue.sql.ts';

/**
 * The queue as the metrics show it (src/metrics.ts), for the whole installation: an operator's
 * view, like the claim, so it takes no tenant's scope. One statement on the ready index.
 */
export async function queueGauges(
  db: Db,
  now: Date,
): Promise<{ ready: number; waiting: number; parked: number; oldestReadyAgeSeconds: number; heldByConcurrency: Map<string, number> }> {
  // `waiting` is the queue's (a retry's time not come); `parked` the runs of status waiting (a wait's time or delivery not come).
  const { rows } = await sql<{ ready: number; waiting: number; parked: number; oldest: Date | null }>`
    select count(*) filter (where run_at <= ${now})::int as ready,
           count(*) filter (where run_at > ${now} and status <> 'waiting')::int as waiting,
           count(*) filter (where run_at > ${now} and status = 'waiting')::int as parked,
           min(run_at) filter (where run_at <= ${now}) as oldest
    from workflow_runs where status in ('queued', 'retrying', 'waiting')`.execute(db);
  const row = rows[0]!;
  const oldest = row.oldest === null ? now.getTime() : new Date(row.oldest).getTime();
  return {
    ready: row.ready,
    waiting: row.waiting,
    parked: row.parked,
    oldestReadyAgeSeconds: Math.max(0, (now.getTime() - oldest) / 1000),
    heldByConcurrency: await heldByConcurrency(db, now),
  };
}
