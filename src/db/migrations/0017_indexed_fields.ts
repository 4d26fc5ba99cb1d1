import { sql, type Kysely } from 'kysely';

/**
 * data_model_fields.is_indexed: the field's values get a btree index on fact_current (one
 * partial expression index per field, built when the setting is turned on; see
 * src/facts/field-index.sql.ts), so that `eq` and range filters on it read only the rows
 * that match, and a count over them need not test every current row of the model.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table data_model_fields add column is_indexed boolean not null default false`.execute(db);
}
