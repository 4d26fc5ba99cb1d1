/**
 * Retention of facts: a model with retention_days keeps the facts observed within that many
 * days; older ones are deleted by the sweep, a bounded batch per short transaction, and
 * fact_current follows (an entity's row moves to its latest remaining fact on that axis,
 * or goes when none remains).
 */
import type { Db } from '../db/connect.ts';
import type { TimeAxis } from '../db/tables.ts';
import { isTransactionConflict } from '../errors.ts';
import * as q from './facts.sql.ts';

export const RETENTION_BATCH = 5_000;

/** Runs of a batch that lost to another transaction: it is one transaction, rolled back whole, so it is simply run again. */
const ATTEMPTS = 3;

async function deleteBatch(trx: Db, dataModelId: string, cutoff: Date, limit: number): Promise<number> {
  const deleted = await q.deleteExpiredFacts(trx, dataModelId, cutoff, limit);
  if (deleted.length === 0) return 0;
  const detached = await q.detachCurrent(trx, dataModelId, deleted);
  const byAxis: Record<TimeAxis, Set<string>> = { observed_at: new Set(), inserted_at: new Set() };
  // A fact without an entity id was its own entity: with the fact gone, so is its row.
  for (const row of detached) if (row.entity_id !== null) byAxis[row.axis].add(row.entity_id);
  await q.restoreCurrent(trx, dataModelId, 'inserted_at', [...byAxis.inserted_at].sort());
  await q.restoreCurrent(trx, dataModelId, 'observed_at', [...byAxis.observed_at].sort());
  return deleted.length;
}

async function inOwnTransaction<T>(db: Db, work: (trx: Db) => Promise<T>): Promise<T> {
  // Inside a caller's transaction the batches cannot commit on their own; run them there.
  if (db.isTransaction) return work(db);
  for (let attempt = 1; ; attempt++) {
    try {
      return await db.transaction().execute(work);
    } catch (err) {
      if (attempt >= ATTEMPTS || !isTransactionConflict(err)) throw err;
    }
  }
}

/**
 * Deletes the facts outside each model's retention window; returns how many. Runs on the
 * handle given (the db, or one connection holding the sweep lock), each batch of at most
 * `batch` facts in its own transaction, so locks are held briefly and writers interleave.
 */
export async function sweepFactRetention(db: Db, opts: { now: Date; batch?: number }): Promise<number> {
  const batch = opts.batch ?? RETENTION_BATCH;
  let total = 0;
  for (const model of await q.modelsWithRetention(db, opts.now)) {
    for (;;) {
      const n = await inOwnTransaction(db, (trx) => deleteBatch(trx, model.id, model.cutoff, batch));
      total += n;
      if (n < batch) break;
    }
  }
  return total;
}
