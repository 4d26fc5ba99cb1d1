import { sql, type Kysely } from 'kysely';

/**
 * What the console reads (issue 23):
 * - workflow_runs.delivery_headers: the headers of the webhook delivery that made the run,
 *   secrets redacted and bounded (triggers/delivery-headers.ts); null for a schedule's run.
 * - api_specs.last_changes: what the last update that altered the operations changed in
 *   them, with its instant; null until one. It counts in answer_bytes, like the other
 *   large columns, so a list's byte budget still sees it.
 * - workflow_versions.id and workspace_id: a version is a JSON:API resource of its own
 *   (workflow_version), found by id and seen only in its workflow's workspace. Versions
 *   saved before get a random id and their workflow's workspace.
 * - workflow_runs (workspace_id, updated_at): the console's live runs list asks every 750 ms
 *   for the runs changed since the newest it saw; without it each ask reads every run of the
 *   workspace.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table workflow_runs add column delivery_headers jsonb`.execute(db);
  await sql`create index workflow_runs_workspace_changed_idx on workflow_runs (workspace_id, updated_at, id)`.execute(db);

  await sql`alter table api_specs add column last_changes jsonb`.execute(db);
  await sql`alter table api_specs drop column answer_bytes`.execute(db);
  await sql`
    alter table api_specs add column answer_bytes bigint generated always as (
      octet_length(raw_document) + octet_length(operations::text) + octet_length(servers::text) + octet_length(security_schemes::text)
        + coalesce(octet_length(last_changes::text), 0)
    ) stored
  `.execute(db);

  await sql`alter table workflow_versions add column id uuid not null default gen_random_uuid()`.execute(db);
  await sql`alter table workflow_versions add column workspace_id uuid references workspaces (id)`.execute(db);
  await sql`update workflow_versions as v set workspace_id = w.workspace_id from workflows as w where w.id = v.workflow_id`.execute(db);
  await sql`alter table workflow_versions alter column workspace_id set not null`.execute(db);
  await sql`create unique index workflow_versions_id_idx on workflow_versions (id)`.execute(db);
  // A list of a workspace's versions, newest first (the default order), and by id.
  await sql`create index workflow_versions_workspace_idx on workflow_versions (workspace_id, inserted_at, id)`.execute(db);
}
