import { sql, type Kysely } from 'kysely';

/**
 * workflows.on_failure and workflow_versions.on_failure: the steps run once when a run
 * fails for good (docs/workflows.md, "on_failure"). Additive with a default, so a worker
 * of the release before reads and writes the rows as it did, and every saved workflow and
 * version has none.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table workflows add column on_failure jsonb not null default '[]'::jsonb`.execute(db);
  await sql`alter table workflow_versions add column on_failure jsonb not null default '[]'::jsonb`.execute(db);
}
