import { sql, type Kysely } from 'kysely';

/**
 * What one api_spec row takes in an answer, near enough (its large columns as text),
 * computed when the row is written: a list reads the running total of it to fetch only the
 * rows that fit LIST_MAX_BYTES, without reading the documents themselves first.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    alter table api_specs add column answer_bytes bigint generated always as (
      octet_length(raw_document) + octet_length(operations::text) + octet_length(servers::text) + octet_length(security_schemes::text)
    ) stored
  `.execute(db);
}
