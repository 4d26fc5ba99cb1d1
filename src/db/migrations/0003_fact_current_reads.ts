import { sql, type Kysely } from 'kysely';

/**
 * fact_current, shaped for filtered latest reads (figures in docs/benchmarks.md):
 *
 * - partitioned by time axis. Every read names one axis, and a latest count has to test
 *   every current row of the model: the writer stores both axes of an entity side by side,
 *   so half of every page such a count read belonged to the other axis.
 * - a GIN (jsonb_path_ops) index on data, for `eq` filters, which are containment tests
 *   (`data @> {"field": value}`) on any model and field: a page or count filtered on a rare
 *   value (one customer's entities) no longer tests every current row, a broad one tests
 *   only the rows the index names. It costs writers some more work on fact_current.
 *
 * Columns, keys and the earlier index names stay as they were; the rows are copied over.
 */
const statements = [
  // Columns, NOT NULLs and the axis check as they are; keys added explicitly (LIKE copies neither).
  sql`create table fact_current_by_axis (like fact_current including defaults including constraints) partition by list (axis)`,
  sql`alter table fact_current_by_axis add constraint fact_current_by_axis_pkey primary key (data_model_id, axis, entity_key)`,
  sql`alter table fact_current_by_axis add constraint fact_current_by_axis_model_fkey foreign key (data_model_id) references data_models (id)`,
  sql`create table fact_current_observed partition of fact_current_by_axis for values in ('observed_at')`,
  sql`create table fact_current_inserted partition of fact_current_by_axis for values in ('inserted_at')`,
  sql`insert into fact_current_by_axis (data_model_id, axis, entity_key, fact_id, workspace_id, entity_id, observed_at, inserted_at, data)
    select data_model_id, axis, entity_key, fact_id, workspace_id, entity_id, observed_at, inserted_at, data from fact_current`,
  sql`drop table fact_current`,
  sql`alter table fact_current_by_axis rename to fact_current`,
  sql`alter table fact_current rename constraint fact_current_by_axis_pkey to fact_current_pkey`,
  sql`alter table fact_current rename constraint fact_current_by_axis_model_fkey to fact_current_data_model_id_fkey`,
  sql`create index fact_current_observed_idx on fact_current (data_model_id, axis, observed_at, fact_id) include (workspace_id)`,
  sql`create index fact_current_inserted_idx on fact_current (data_model_id, axis, inserted_at, fact_id) include (workspace_id)`,
  sql`create index fact_current_fact_idx on fact_current (fact_id)`,
  sql`create index fact_current_data_idx on fact_current using gin (data jsonb_path_ops)`,
];

export async function up(db: Kysely<any>): Promise<void> {
  for (const statement of statements) await statement.execute(db);
}
