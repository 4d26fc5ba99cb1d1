/**
 * Retention: deletes what has outlived its window, in bounded batches so a large sweep
 * never holds long locks. Facts and delivery guards join here in their issues.
 */
import type { Db } from '../db/connect.ts';
import { deleteExpiredKeys } from '../http/idempotency.sql.ts';

const BATCH = 5_000;

export interface SweepResult {
  idempotency_keys_deleted: number;
}

export async function sweep(deps: { db: Db }): Promise<SweepResult> {
  let deleted = 0;
  for (;;) {
    const n = await deleteExpiredKeys(deps.db, BATCH);
    deleted += n;
    if (n < BATCH) break;
  }
  return { idempotency_keys_deleted: deleted };
}
