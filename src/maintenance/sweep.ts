/**
 * Retention: deletes what has outlived its window, in bounded batches so a large sweep
 * never holds long locks: expired idempotency keys, facts past their model's retention,
 * delivery guards past DELIVERY_GUARD_DAYS and finished runs past RUN_RETENTION_DAYS.
 */
import { ADVISORY_LOCK } from '../db/advisory-locks.ts';
import { sql } from 'kysely';
import type { Db } from '../db/connect.ts';
import { deleteExpiredKeys } from '../http/idempotency.sql.ts';
import { sweepFactRetention } from '../facts/retention.ts';
import { deleteExpiredGuards } from '../webhooks/webhooks.sql.ts';
import { deleteFinishedRuns } from '../runs/queue.sql.ts';

const BATCH = 5_000;

export interface SweepOptions {
  /** The sweep's instant (Deps.clock): what expired before it goes. */
  now: Date;
  /** Facts deleted per transaction (tests use small batches to sweep across batch boundaries). */
  factBatch?: number;
  /** Days delivery guards are kept (DELIVERY_GUARD_DAYS). */
  guardDays: number;
  /** Days finished runs are kept (RUN_RETENTION_DAYS). */
  runRetentionDays: number;
}

export interface SweepResult {
  idempotency_keys_deleted: number;
  facts_deleted: number;
  delivery_guards_deleted: number;
  workflow_runs_deleted: number;
}

async function inBatches(step: () => Promise<number>): Promise<number> {
  let total = 0;
  for (;;) {
    const n = await step();
    total += n;
    if (n < BATCH) return total;
  }
}

/**
 * The sweep under its lock, or undefined when another sweep holds it. Two sweeps at once
 * would corrupt fact_current: one restores an entity's row to a fact the other has deleted
 * but not yet committed. One connection holds the lock while the sweep commits batch by
 * batch on it (one long transaction would hold every deleted row's lock until the end).
 */
export async function sweepExclusive(db: Db, opts: SweepOptions): Promise<SweepResult | undefined> {
  return db.connection().execute(async (conn) => {
    const { rows } = await sql<{ locked: boolean }>`select pg_try_advisory_lock(${ADVISORY_LOCK.sweep}) as locked`.execute(conn);
    if (!rows[0]?.locked) return undefined;
    try {
      return await sweep(conn, opts);
    } finally {
      await sql`select pg_advisory_unlock(${ADVISORY_LOCK.sweep})`.execute(conn);
    }
  });
}

/** The sweep itself, on the handle given; callers other than tests go through sweepExclusive. */
export async function sweep(db: Db, opts: SweepOptions): Promise<SweepResult> {
  const day = 86_400_000;
  const deleted = await inBatches(() => deleteExpiredKeys(db, opts.now, BATCH));
  const factsDeleted = await sweepFactRetention(db, { now: opts.now, batch: opts.factBatch });
  const guardCutoff = new Date(opts.now.getTime() - opts.guardDays * day);
  const guards = await inBatches(() => deleteExpiredGuards(db, guardCutoff, BATCH));
  const runCutoff = new Date(opts.now.getTime() - opts.runRetentionDays * day);
  const runs = await inBatches(() => deleteFinishedRuns(db, runCutoff, BATCH));
  return { idempotency_keys_deleted: deleted, facts_deleted: factsDeleted, delivery_guards_deleted: guards, workflow_runs_deleted: runs };
}
