import { sql, type Kysely } from 'kysely';

/**
 * Workflows, their triggers and versions; workflow runs, which are also the worker's jobs;
 * delivery guards, which make a webhook delivery start at most one run per organization.
 *
 * A run row is its own job (status, run_at, lease columns): a delivery then commits its
 * guard and its run in one statement, and the worker claims runs directly.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table workflows (
      id uuid primary key,
      organization_id uuid not null references organizations (id),
      workspace_id uuid not null references workspaces (id),
      name text not null,
      description text,
      is_active boolean not null default true,
      version integer not null default 1,
      -- Bumped whenever the saved graph changes; lock_version is built from it.
      revision integer not null default 1,
      graph_hash text not null,
      lock_version text not null,
      steps jsonb not null,
      triggers jsonb not null,
      inserted_at timestamptz(3) not null default now(),
      updated_at timestamptz(3) not null default now()
    )
  `.execute(db);
  await sql`create index workflows_workspace_idx on workflows (workspace_id, inserted_at, id)`.execute(db);

  // The steps of every version, so a run executes the definition it was made with.
  await sql`
    create table workflow_versions (
      workflow_id uuid not null references workflows (id) on delete cascade,
      version integer not null,
      steps jsonb not null,
      inserted_at timestamptz(3) not null default now(),
      primary key (workflow_id, version)
    )
  `.execute(db);

  await sql`
    create table workflow_triggers (
      id uuid primary key,
      workflow_id uuid not null references workflows (id) on delete cascade,
      organization_id uuid not null references organizations (id),
      workspace_id uuid not null references workspaces (id),
      key text not null,
      type text not null check (type in ('webhook')),
      service_account_id uuid not null references service_accounts (id),
      inbound_connector_id uuid references external_connectors (id),
      token_hash text not null,
      inserted_at timestamptz(3) not null default now(),
      updated_at timestamptz(3) not null default now(),
      constraint workflow_triggers_token_hash unique (token_hash),
      constraint workflow_triggers_key unique (workflow_id, key)
    )
  `.execute(db);

  await sql`
    create table workflow_runs (
      id uuid primary key,
      organization_id uuid not null references organizations (id),
      workspace_id uuid not null references workspaces (id),
      workflow_id uuid not null references workflows (id),
      workflow_version integer not null,
      trigger_key text,
      delivery_id text,
      payload jsonb not null,
      status text not null default 'queued' check (status in ('queued', 'running', 'retrying', 'succeeded', 'failed')),
      attempt integer not null default 0,
      max_attempts integer not null default 5,
      steps jsonb not null default '[]',
      error text,
      replay_of uuid references workflow_runs (id) on delete set null,
      run_at timestamptz(3) not null default now(),
      locked_by text,
      locked_until timestamptz(3),
      inserted_at timestamptz(3) not null default now(),
      updated_at timestamptz(3) not null default now(),
      started_at timestamptz(3),
      finished_at timestamptz(3)
    )
  `.execute(db);
  await sql`create index workflow_runs_workspace_idx on workflow_runs (workspace_id, inserted_at, id)`.execute(db);
  await sql`create index workflow_runs_workflow_idx on workflow_runs (workflow_id, inserted_at)`.execute(db);
  // The queue: what is ready to claim, and whose lease may have run out.
  await sql`create index workflow_runs_ready_idx on workflow_runs (run_at) where status in ('queued', 'retrying')`.execute(db);
  await sql`create index workflow_runs_leased_idx on workflow_runs (locked_until) where status = 'running'`.execute(db);
  await sql`create index workflow_runs_finished_idx on workflow_runs (finished_at) where status in ('succeeded', 'failed')`.execute(db);

  // One row per (organization, delivery identity): the unique key decides which of two
  // concurrent identical deliveries makes the run.
  await sql`
    create table delivery_guards (
      organization_id uuid not null references organizations (id),
      delivery_key text not null,
      run_id uuid not null,
      inserted_at timestamptz(3) not null,
      primary key (organization_id, delivery_key)
    )
  `.execute(db);
  await sql`create index delivery_guards_inserted_idx on delivery_guards (inserted_at)`.execute(db);
}
