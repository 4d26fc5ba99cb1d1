/**
 * Retention: deletes what has outlived its window, in bounded batches so a large sweep
 * never holds long locks. Delivery guards join here in their issue.
 */
import type { Db } from '../db/connect.ts';
import { deleteExpiredKeys } from '../http/idempotency.sql.ts';
import { sweepFactRetention } from '../facts/retention.ts';

const BATCH = 5_000;

export interface SweepResult {
  idempotency_keys_deleted: number;
  facts_deleted: number;
}

export async function sweep(deps: { db: Db }): Promise<SweepResult> {
  let deleted = 0;
  for (;;) {
    const n = await deleteExpiredKeys(deps.db, BATCH);
    deleted += n;
    if (n < BATCH) break;
  }
  const factsDeleted = await sweepFactRetention(deps.db);
  return { idempotency_keys_deleted: deleted, facts_deleted: factsDeleted };
}
