/**
 * The one write path of facts. Workflow steps and the import call it; nothing else
 * inserts into facts or fact_current.
 */
import type { Db } from '../db/connect.ts';
import { uuidv7 } from '../ids.ts';
import type { Metrics } from '../metrics.ts';
import * as q from './facts.sql.ts';
import { validateFact, type FactModel, type FactInput } from './validate.ts';

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
 * them with fromPgError).
 */
export async function writeFacts(
  db: Db,
  scope: FactScope,
  model: FactModel,
  items: FactInput[],
  metrics?: Pick<Metrics, 'factsWritten'>,
): Promise<WriteResult> {
  const errors: WriteError[] = [];
  const ids: (string | null)[] = new Array<string | null>(items.length).fill(null);
  const rows: Array<q.NewFact & { index: number }> = [];
  items.forEach((item, index) => {
    const v = validateFact(model, item);
    if (!v.ok) {
      for (const e of v.errors) errors.push({ index, ...e });
      return;
    }
    rows.push({
      index,
      id: uuidv7(),
      entity_id: v.fact.entityId,
      observed_at: v.fact.observedAt,
      data: JSON.stringify(v.fact.data),
      source_key: v.fact.sourceKey,
    });
  });
  if (rows.length === 0) return { written: 0, duplicates: 0, errors, ids };

  // Every writer inserts in source-key order, so two writers of the same keys queue on the
  // unique index in one order and cannot deadlock each other.
  rows.sort((a, b) => (a.source_key < b.source_key ? -1 : a.source_key > b.source_key ? 1 : 0));

  // One statement (facts and fact_current together), atomic on its own: no transaction needed.
  const written = new Set(await q.storeFacts(db, { ...scope, dataModelId: model.id }, rows));

  // Counted as stored: given a transaction, a rollback after this would count facts that are not.
  metrics?.factsWritten(written.size);
  for (const row of rows) if (written.has(row.id)) ids[row.index] = row.id;
  return { written: written.size, duplicates: rows.length - written.size, errors, ids };
}
