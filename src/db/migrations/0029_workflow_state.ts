import { sql, type Kysely } from 'kysely';

/**
 * workflow_state: a workflow's small JSON document (docs/workflows.md, "Workflow state"),
 * read as `state` by every expression of its runs and written by set_state steps. One row
 * per workflow and key; this release reads and writes the key '' only, the column is there
 * so that keyed documents are an addition, not a change. The size cap is the step's
 * (steps/set-state.ts), not a constraint: a later release may raise it without a migration.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table workflow_state (
      id uuid primary key,
      workspace_id uuid not null references workspaces (id),
      workflow_id uuid not null references workflows (id) on delete cascade,
      key text not null default '',
      value jsonb not null,
      updated_by_run_id uuid,
      inserted_at timestamptz not null,
      updated_at timestamptz not null,
      unique (workflow_id, key)
    )`.execute(db);
  await sql`create index workflow_state_workspace_idx on workflow_state (workspace_id, workflow_id)`.execute(db);
}
