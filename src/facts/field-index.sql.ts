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

/**
 * Types whose filters an index answers better than the GIN index on data: numbers, for
 * ranges (`eq` on any scalar is containment, which the GIN index answers; measured in
 * docs/benchmarks.md, a btree for `eq` made counts with two filters slower, as it leaves
 * the other filter to a test per row where the GIN index narrows by both). datetime is not
 * among them: its comparison casts text to timestamptz, which PostgreSQL deems STABLE (it
 * may read TimeZone), and an index expression must be IMMUTABLE.
 */
export const INDEXABLE_TYPES: ReadonlySet<FieldType | null> = new Set<FieldType | null>(['integer', 'float']);

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

/** 'concurrent': PostgreSQL, outside any transaction; 'plain': PGlite, or inside a transaction. */
export type IndexBuild = 'concurrent' | 'plain';

interface IndexedField {
  id: string;
  workspace_id: string;
  data_model_id: string;
  name: string;
  type: FieldType | null;
}

/**
 * Builds the field's index, one per partition of fact_current (an index of the partitioned
 * table would need one predicate for both): its predicate names the model, its workspace
 * and the partition's axis, every condition a latest read has besides its filters, so the
 * planner drops them from the scan and a count of one filter is an index-only scan.
 *
 * 'concurrent' builds without blocking writers (CREATE INDEX CONCURRENTLY, PostgreSQL only,
 * never inside a transaction; the service's write routes run on the database, not in a
 * transaction). 'plain' holds writers of the partition for the build: PGlite (one
 * connection, writers wait for it anyway), or a caller inside a transaction.
 */
export async function createFieldIndex(db: Db, build: IndexBuild, f: IndexedField): Promise<void> {
  if (!isUuid(f.data_model_id) || !isUuid(f.workspace_id)) throw new Error(`not a data model of a workspace: ${f.data_model_id}`);
  const names = fieldIndexNames(f.id);
  const concurrently = build === 'concurrent' ? sql`concurrently` : sql``;
  for (const [i, p] of PARTITIONS.entries()) {
    const name = sql.id(names[i]!);
    const operand = indexedOperand(sql.ref('data') as Frag, f.name);
    // A concurrent build that failed leaves an invalid index behind: dropped first, then built again.
    await sql`drop index ${concurrently} if exists ${name}`.execute(db);
    await sql`create index ${concurrently} ${name} on ${sql.id(p.table)} (${operand})
      where data_model_id = ${sql.lit(f.data_model_id)} and workspace_id = ${sql.lit(f.workspace_id)} and axis = ${sql.lit(p.axis)}`.execute(db);
    // The planner takes no statistics from a partial index's expression: without these it
    // guesses a filter's rows (0.5% for eq, a third for a range), and with that guess it
    // neither combines two filters' indexes nor walks the page in order where it should.
    // Per model (data_model_id with the value), so one model's values do not stand for another's;
    // the list keeps the most common pairs of the whole partition, so a small model among
    // large ones may fall back to the guess.
    await sql`drop statistics if exists ${name}`.execute(db);
    await sql`create statistics ${name} (mcv) on data_model_id, (${operand}) from ${sql.id(p.table)}`.execute(db);
  }
  for (const p of PARTITIONS) await sql`analyze ${sql.id(p.table)}`.execute(db);
}

/** Drops the field's indexes and statistics. */
export async function dropFieldIndex(db: Db, build: IndexBuild, fieldId: string): Promise<void> {
  const concurrently = build === 'concurrent' ? sql`concurrently` : sql``;
  for (const name of fieldIndexNames(fieldId)) {
    await sql`drop index ${concurrently} if exists ${sql.id(name)}`.execute(db);
    await sql`drop statistics if exists ${sql.id(name)}`.execute(db);
  }
}
