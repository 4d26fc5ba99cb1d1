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
): Promise<{ ready: number; waiting: number; oldestReadyAgeSeconds: number; heldByConcurrency: Map<string, number> }> {
  const { rows } = await sql<{ ready: number; waiting: number; oldest: Date | null }>`
    select count(*) filter (where run_at <= ${now})::int as ready, count(*) filter (where run_at > ${now})::int as waiting,
           min(run_at) filter (where run_at <= ${now}) as oldest
    from workflow_runs where status in ('queued', 'retrying')`.execute(db);
  const row = rows[0]!;
  const oldest = row.oldest === null ? now.getTime() : new Date(row.oldest).getTime();
  return {
    ready: row.ready,
    waiting: row.waiting,
    oldestReadyAgeSeconds: Math.max(0, (now.getTime() - oldest) / 1000),
    heldByConcurrency: await heldByConcurrency(db, now),
  };
}
