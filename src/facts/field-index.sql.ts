/**
 * Indexed fields (data_model_fields.is_indexed): per field a btree index on each partition
 * of fact_current, partial to the field's data model and keyed by the typed expression that factQuery's
 * filters compare (filters.sql.ts builds its predicates on an indexed field from
 * indexedOperand, the same function that builds the index, so the planner can match them).
 *
 * The field name is a literal in both (a bound parameter would be a different expression
 * to the planner); names are [a-z][a-z0-9_]* (data_model_fields/service.ts). The ids in the
 * index predicate are literals too; a query's bound `data_model_id = $1` proves them
 * because fact statements run unnamed, planned with their values.
 */
import { sql } from 'kysely';
import type { Db } from '../db/connect.ts';
import type { FieldType } from '../db/tables.ts';
import { isUuid } from '../ids.ts';
import type { Frag } from './query/plan-types.ts';
import { ALL_SLOTS, assignSlot, backfillSlot, markSlotReady, releaseSlot, waitForOlderWriters } from './slots.sql.ts';

/**
 * Types whose filters an index answers better than the GIN index on data: numbers, for
 * ranges (`eq` on any scalar is containment, which the GIN index answers; measured in
 * docs/benchmarks.md, a btree for `eq` made counts with two filters slower, as it leaves
 * the other filter to a test per row where the GIN index narrows by both). datetime is not
 * among them: its comparison casts text to timestamptz, which PostgreSQL deems STABLE (it
 * may read TimeZone), and an index expression must be IMMUTABLE.
 */
export const INDEXABLE_TYPES: ReadonlySet<FieldType | null> = new Set<FieldType | null>(['integer', 'float']);

/**
 * Types an indexed field may have: those with a typed slot (slots.sql.ts), whose column the
 * field's indexes key on. Map and untyped fields have none (eq on them is containment,
 * answered by the GIN index on data).
 */
export const SLOTTED_TYPES: ReadonlySet<FieldType | null> = new Set<FieldType | null>(['integer', 'float', 'string', 'boolean', 'datetime']);

const FIELD_NAME = /^[a-z][a-z0-9_]*$/;

/** The indexed value of a number field over `data`: numeric, null unless the member is a JSON number. */
export function indexedOperand(data: Frag, field: string): Frag {
  if (!FIELD_NAME.test(field)) throw new Error(`not an indexable field name: ${field}`);
  const name = sql.lit(field);
  return sql`(case when jsonb_typeof(${data} -> ${name}) = 'number' then (${data} ->> ${name})::numeric end)`;
}

/** fact_current's partitions (migration 0003), each holding one time axis. */
const PARTITIONS = [
  { table: 'fact_current_observed', axis: 'observed_at', suffix: 'observed' },
  { table: 'fact_current_inserted', axis: 'inserted_at', suffix: 'inserted' },
] as const;

/** The field's index on each partition of fact_current. */
export function fieldIndexNames(fieldId: string): string[] {
  return PARTITIONS.map((p) => `fact_current_field_${fieldId.replaceAll('-', '')}_${p.suffix}`);
}

/** The field's index on facts (timeline windows on observed_at filtered or grouped by the field). */
export function factsFieldIndexName(fieldId: string): string {
  return `facts_field_${fieldId.replaceAll('-', '')}`;
}

/** 'concurrent': PostgreSQL, outside any transaction; 'plain': PGlite, or inside a transaction. */
export type IndexBuild = 'concurrent' | 'plain';

interface IndexedField {
  id: string;
  workspace_id: string;
  data_model_id: string;
  name: string;
  type: FieldType | null;
  slot?: string | null;
}

/**
 * Makes the field's typed storage and builds its indexes (docs/architecture.md, "Typed storage
 * of indexed fields"): the field takes a slot (slots.sql.ts), so writers fill it from then on;
 * with every statement that read the slots before gone (concurrent builds), the backfill fills
 * it on the facts and current rows stored before, in batches; then the indexes, and the slot
 * becomes what readers read (slot_ready). Each step can run again: setting is_indexed: true
 * again redoes all of it, the way out after a build that failed midway.
 *
 * Per partition of fact_current one index keyed by (slot, observed_at, fact_id) and carrying
 * every other slot: its predicate names the model, its workspace and the partition's axis,
 * every condition a latest read has besides its filters, so a filtered count, or a count
 * grouped by the field, reads only the index (an index-only scan), and a page filtered by eq
 * walks it in order. On facts one index (slot, observed_at, id) including workspace_id, for
 * timeline windows. The old expression index of the field (issue 25) had the same names: it
 * is replaced.
 *
 * 'concurrent' builds without blocking writers (CREATE INDEX CONCURRENTLY, PostgreSQL only,
 * never inside a transaction). 'plain' holds writers of the table for the build: PGlite, or a
 * caller inside a transaction.
 */
export async function createFieldIndex(db: Db, build: IndexBuild, f: IndexedField): Promise<void> {
  if (!isUuid(f.data_model_id) || !isUuid(f.workspace_id)) throw new Error(`not a data model of a workspace: ${f.data_model_id}`);
  if (!FIELD_NAME.test(f.name)) throw new Error(`not an indexable field name: ${f.name}`);
  const assigned = await assignSlot(db, f);
  if (assigned === undefined) throw new Error(`no free slot for field ${f.name} of type ${f.type ?? 'untyped'}`);
  const { slot } = assigned;
  if (build === 'concurrent') await waitForOlderWriters(db, 'postgres', assigned.xid);
  await backfillSlot(db, f, slot, slot);
  const names = fieldIndexNames(f.id);
  const concurrently = build === 'concurrent' ? sql`concurrently` : sql``;
  const carried = sql.raw(['workspace_id', ...ALL_SLOTS.filter((s) => s !== slot)].join(', '));
  for (const [i, p] of PARTITIONS.entries()) {
    const name = sql.id(names[i]!);
    // A concurrent build that failed leaves an invalid index behind: dropped first, then built again.
    await sql`drop index ${concurrently} if exists ${name}`.execute(db);
    await sql`create index ${concurrently} ${name} on ${sql.id(p.table)} (${sql.id(slot)}, observed_at, fact_id) include (${carried})
      where data_model_id = ${sql.lit(f.data_model_id)} and workspace_id = ${sql.lit(f.workspace_id)} and axis = ${sql.lit(p.axis)}`.execute(db);
    // The planner's column statistics mix every model's values of a slot: per model (data_model_id
    // with the slot), so one model's values do not stand for another's.
    await sql`drop statistics if exists ${name}`.execute(db);
    await sql`create statistics ${name} (mcv, dependencies) on data_model_id, ${sql.id(slot)} from ${sql.id(p.table)}`.execute(db);
  }
  const factsIndex = sql.id(factsFieldIndexName(f.id));
  await sql`drop index ${concurrently} if exists ${factsIndex}`.execute(db);
  await sql`create index ${concurrently} ${factsIndex} on facts (${sql.id(slot)}, observed_at, id) include (workspace_id)
    where data_model_id = ${sql.lit(f.data_model_id)}`.execute(db);
  await markSlotReady(db, f.id, slot);
  for (const p of PARTITIONS) await sql`analyze ${sql.id(p.table)}`.execute(db);
}

/** Drops the field's indexes and statistics. */
export async function dropFieldIndex(db: Db, build: IndexBuild, fieldId: string): Promise<void> {
  const concurrently = build === 'concurrent' ? sql`concurrently` : sql``;
  for (const name of fieldIndexNames(fieldId)) {
    await sql`drop index ${concurrently} if exists ${sql.id(name)}`.execute(db);
    await sql`drop statistics if exists ${sql.id(name)}`.execute(db);
  }
  await sql`drop index ${concurrently} if exists ${sql.id(factsFieldIndexName(fieldId))}`.execute(db);
}

/**
 * is_indexed turned off: the field gives up its slot (readers go back to `data` at once),
 * then its indexes, and its values are cleared from the slot, so the next field to take it
 * starts from nulls (its own backfill writes every row again anyway).
 */
export async function dropFieldStorage(
  db: Db,
  build: IndexBuild,
  f: { id: string; data_model_id: string; name: string; type: FieldType | null },
): Promise<void> {
  const released = await releaseSlot(db, f.id);
  await dropFieldIndex(db, build, f.id);
  if (released === undefined) return;
  if (build === 'concurrent') await waitForOlderWriters(db, 'postgres', released.xid);
  await backfillSlot(db, f, null, released.slot);
}
