import { sql, type Kysely } from 'kysely';

/**
 * Workflow state per key (docs/workflows.md, "Workflow state"). workflows.state_key and
 * workflow_versions.state_key hold a workflow's key expression (null: the one document, key
 * ''); a run keeps the key computed when it was enqueued (workflow_runs.state_key; null: '',
 * as every run of before). All nullable, no default: rows of before stay as they were, and a
 * process of the release before reads and writes the key '' as it did. workflow_state's
 * unique (workflow_id, key) of 0029 already serves each run's read and write of its key.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table workflows add column state_key text`.execute(db);
  await sql`alter table workflow_versions add column state_key text`.execute(db);
  await sql`alter table workflow_runs add column state_key text`.execute(db);
}
