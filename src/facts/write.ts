/**
 * The one write path of facts. Workflow steps and the import call it; nothing else
 * inserts into facts or fact_current.
 */
import type { Db } from '../db/connect.ts';
import { uuidv7 } from '../ids.ts';
import type { Metrics } from '../metrics.ts';
import * as q from './facts.sql.ts';
import { validateFact, type FactModel, type FactInput, type ValidFact } from './validate.ts';

export type { FactField, FactModel, FactInput } from './validate.ts';

export interface FactScope {
  organizationId: string;
  workspaceId: string;
}

export interface WriteError {
  /** Position of the item in `items`. */
  index: number;
  /** JSON pointer into the item: '/observed_at', '/data/amount', '/source_key', ... */
  pointer: string;
  detail: string;
}

/**
 * Stores prepared facts and resolves with the ids written (it may hold more: a shared
 * statement's). The direct store is one statement per call; the worker's fact writer
 * (fact-writer.ts) stores the facts of concurrent runs together.
 */
export type FactStore = (db: Db, rows: q.ScopedFact[]) => Promise<ReadonlySet<string>>;

/** One statement per call, on the handle given (a transaction: it commits with the caller's writes). */
export const storeDirect: FactStore = async (db, rows) => new Set(await q.storeFactRows(db, rows));

export interface WriteResult {
  /** Facts stored by this call. */
  written: number;
  /** Valid items whose source key was already stored (or repeated within the call). */
  duplicates: number;
  /** One entry per problem; an item may have several. */
  errors: WriteError[];
  /** Per item: the id of the fact this call stored, null for a rejected item or a duplicate. */
  ids: (string | null)[];
}

/**
 * Validates `items` against `model`, stores the valid ones and keeps fact_current right on
 * both axes. Invalid items are reported in `errors` and skipped; they never fail the call.
 *
 * `db` is a transaction or the db: the store is one statement, atomic on its own; given a
 * transaction, it commits with the caller's other writes.
 * It queries no other handle. Database errors are thrown as they come (callers translate
 * them with fromPgError). `store` is where the facts go: the direct store unless the
 * caller has a batching one (the worker).
 */
export async function writeFacts(
  db: Db,
  scope: FactScope,
  model: FactModel,
  items: FactInput[],
  metrics?: Pick<Metrics, 'factsWritten'>,
  store: FactStore = storeDirect,
): Promise<WriteResult> {
  const errors: WriteError[] = [];
  const ids: (string | null)[] = new Array<string | null>(items.length).fill(null);
  const valid: ValidFact[] = [];
  const at: number[] = [];
  items.forEach((item, index) => {
    const v = validateFact(model, item);
    if (!v.ok) {
      for (const e of v.errors) errors.push({ index, ...e });
      return;
    }
    valid.push(v.fact);
    at.push(index);
  });
  if (valid.length === 0) return { written: 0, duplicates: 0, errors, ids };
  const stored = await storeValidFacts(db, scope, model, valid, metrics, store);
  stored.ids.forEach((id, i) => (ids[at[i]!] = id));
  return { written: stored.written, duplicates: stored.duplicates, errors, ids };
}

/**
 * Stores facts validateFact already accepted, as they are: a caller that validated them
 * (a write_fact step, all or nothing) does not pay for it twice. Otherwise as writeFacts.
 */
export async function storeValidFacts(
  db: Db,
  scope: FactScope,
  model: Pick<FactModel, 'id'>,
  facts: readonly ValidFact[],
  metrics?: Pick<Metrics, 'factsWritten'>,
  store: FactStore = storeDirect,
): Promise<Omit<WriteResult, 'errors'>> {
  if (facts.length === 0) return { written: 0, duplicates: 0, ids: [] };
  const rows: q.ScopedFact[] = facts.map((fact) => ({
    id: uuidv7(),
    organization_id: scope.organizationId,
    workspace_id: scope.workspaceId,
    data_model_id: model.id,
    entity_id: fact.entityId,
    observed_at: fact.observedAt,
    data: JSON.stringify(fact.data),
    source_key: fact.sourceKey,
  }));
  // One statement (facts and fact_current together), atomic on its own: no transaction
  // needed. It sorts the rows (by model and source key) for its lock order.
  const stored = await store(db, rows);
  const ids = rows.map((row) => (stored.has(row.id) ? row.id : null));
  const count = ids.filter((id) => id !== null).length;
  // Counted as stored: given a transaction, a rollback after this would count facts that are not.
  metrics?.factsWritten(count);
  return { written: count, duplicates: rows.length - count, ids };
}
