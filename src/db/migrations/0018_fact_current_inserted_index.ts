import { sql, type Kysely } from 'kysely';

/**
 * fact_current_inserted_idx (data_model_id, axis, inserted_at, fact_id) on the inserted_at
 * partition only. On the observed_at partition no read used it: every read of that
 * partition filters and orders by observed_at (latest pages order by observed_at on both
 * axes; `since` and as-of `until` compare the axis' own column), yet every write paid for
 * an entry in it (about a tenth of the store's PostgreSQL CPU per fact; figures in
 * docs/benchmarks.md). The name and the columns stay, so plans on the inserted_at axis are
 * unchanged.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`drop index fact_current_inserted_idx`.execute(db);
  await sql`create index fact_current_inserted_idx on fact_current_inserted (data_model_id, axis, inserted_at, fact_id) include (workspace_id)`.execute(db);
}
