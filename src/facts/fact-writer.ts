/**
 * The worker's fact writer: the write_fact stores of concurrently executing runs go
 * together in one statement, like a group commit. While one statement stores some, the
 * stores that arrive meanwhile wait and go together in the next. A statement and its commit
 * cost PostgreSQL about as much as the facts themselves (figures in docs/benchmarks.md), so
 * under load most of that is paid once per batch instead of once per run.
 *
 * At most once per source key holds as it does for one run: the statement skips a key
 * already stored or repeated earlier in it, and each run is told which of its facts were
 * written. A transient database error (unreachable, busy, in conflict) fails every run of
 * its batch, each retrying as it would alone; any other error fails a batch of several runs
 * before it commits anything, so each of them is then stored on its own, and the error
 * reaches only the run it belongs to.
 */
import type { Db } from '../db/connect.ts';
import { isTransientDatabaseError } from '../errors.ts';
import * as q from './facts.sql.ts';
import type { FactStore } from './write.ts';

/** Rows one statement takes at most (a run with for_each alone may exceed it: it goes alone). */
export const MAX_BATCH_ROWS = 5_000;

export interface FactWriter {
  store: FactStore;
  /** Statements issued so far (tests count them). */
  statements(): number;
}

interface Pending {
  rows: q.ScopedFact[];
  resolve: (ids: ReadonlySet<string>) => void;
  reject: (err: unknown) => void;
}

/** A writer on `db` (the pool: never a transaction, which would join unrelated runs' facts to it). */
export function factWriter(db: Db, maxRows = MAX_BATCH_ROWS): FactWriter {
  let pending: Pending[] = [];
  let writing = false;
  let statements = 0;
  const storeRows = async (rows: q.ScopedFact[]) => {
    statements++;
    return new Set(await q.storeFactRows(db, rows));
  };
  const drain = async () => {
    if (writing) return;
    writing = true;
    try {
      while (pending.length > 0) {
        let take = 1;
        let rows = pending[0]!.rows.length;
        while (take < pending.length && rows + pending[take]!.rows.length <= maxRows) rows += pending[take++]!.rows.length;
        const batch = pending.slice(0, take);
        pending = pending.slice(take);
        try {
          const written = await storeRows(batch.flatMap((p) => p.rows));
          for (const p of batch) p.resolve(written);
        } catch (err) {
          if (batch.length === 1 || isTransientDatabaseError(err)) {
            for (const p of batch) p.reject(err);
            continue;
          }
          // Nothing of the batch was stored (one statement): each run on its own, so that
          // what is wrong with one run's facts fails that run only.
          for (const p of batch) await storeRows(p.rows).then(p.resolve, p.reject);
        }
      }
    } finally {
      writing = false;
    }
  };
  return {
    store: (_db, rows) =>
      new Promise<ReadonlySet<string>>((resolve, reject) => {
        pending.push({ rows, resolve, reject });
        void drain();
      }),
    statements: () => statements,
  };
}
