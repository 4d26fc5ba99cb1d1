import { sql, type Kysely } from 'kysely';

// One statement per query: PGlite's extended protocol takes a single statement.
const statements = [
  sql`create table organizations (
    id uuid primary key,
    name text not null,
    domain text not null,
    inserted_at timestamptz(3) not null default now(),
    updated_at timestamptz(3) not null default now()
  )`,
  sql`create unique index organizations_domain_key on organizations (lower(domain))`,
  sql`create table workspaces (
    id uuid primary key,
    organization_id uuid not null references organizations (id),
    name text not null,
    inserted_at timestamptz(3) not null default now(),
    updated_at timestamptz(3) not null default now()
  )`,
  sql`create index workspaces_organization_id_idx on workspaces (organization_id)`,
  sql`create table users (
    id uuid primary key,
    email text not null,
    first_name text,
    last_name text,
    phone_number text,
    timezone text,
    preferences jsonb not null default '{}',
    inserted_at timestamptz(3) not null default now(),
    updated_at timestamptz(3) not null default now()
  )`,
  sql`create unique index users_email_key on users (lower(email))`,
  sql`create table org_memberships (
    id uuid primary key,
    organization_id uuid not null references organizations (id),
    user_id uuid not null references users (id),
    role text not null check (role in ('owner', 'admin', 'member')),
    is_active boolean not null default true,
    inserted_at timestamptz(3) not null default now(),
    updated_at timestamptz(3) not null default now(),
    constraint org_memberships_org_user_key unique (organization_id, user_id)
  )`,
  sql`create index org_memberships_user_id_idx on org_memberships (user_id)`,
  sql`create table service_accounts (
    id uuid primary key,
    organization_id uuid not null references organizations (id),
    workspace_id uuid not null references workspaces (id),
    run_as_membership_id uuid not null references org_memberships (id),
    name text not null,
    client_id text not null,
    secret_hash text not null,
    scopes text[] not null,
    is_active boolean not null default true,
    tokens_not_before timestamptz(3),
    inserted_at timestamptz(3) not null default now(),
    updated_at timestamptz(3) not null default now(),
    constraint service_accounts_client_id_key unique (client_id)
  )`,
  sql`create index service_accounts_workspace_id_idx on service_accounts (workspace_id, inserted_at)`,
  sql`create table data_models (
    id uuid primary key,
    organization_id uuid not null references organizations (id),
    workspace_id uuid not null references workspaces (id),
    name text not null,
    slug text not null,
    description text,
    retention_days integer check (retention_days >= 1),
    inserted_at timestamptz(3) not null default now(),
    updated_at timestamptz(3) not null default now(),
    constraint data_models_org_slug_key unique (organization_id, slug)
  )`,
  sql`create index data_models_workspace_idx on data_models (workspace_id, inserted_at, id)`,
  sql`create table data_model_fields (
    id uuid primary key,
    organization_id uuid not null references organizations (id),
    workspace_id uuid not null references workspaces (id),
    data_model_id uuid not null references data_models (id),
    name text not null,
    label text not null,
    description text,
    type text check (type in ('string', 'integer', 'boolean', 'datetime', 'float', 'map')),
    is_primary_key boolean not null default false,
    is_required boolean not null default false,
    constraints jsonb,
    inserted_at timestamptz(3) not null default now(),
    updated_at timestamptz(3) not null default now(),
    constraint data_model_fields_model_name_key unique (data_model_id, name)
  )`,
  sql`create unique index data_model_fields_one_primary_key on data_model_fields (data_model_id) where is_primary_key`,
  sql`create index data_model_fields_workspace_idx on data_model_fields (workspace_id, inserted_at, id)`,
  sql`create table dashboard_widgets (
    id uuid primary key,
    organization_id uuid not null references organizations (id),
    workspace_id uuid not null references workspaces (id),
    data_model_id uuid references data_models (id),
    dashboard text not null default 'home',
    kind text not null,
    title text,
    position jsonb not null,
    config jsonb not null default '{}',
    inserted_at timestamptz(3) not null default now(),
    updated_at timestamptz(3) not null default now()
  )`,
  sql`create index dashboard_widgets_workspace_idx on dashboard_widgets (workspace_id, inserted_at, id)`,
  sql`create table idempotency_keys (
    credential_id uuid not null references service_accounts (id),
    key text not null,
    fingerprint text not null,
    state text not null check (state in ('in_flight', 'done')),
    status integer,
    body text,
    locked_until timestamptz(3) not null,
    expires_at timestamptz(3) not null,
    inserted_at timestamptz(3) not null default now(),
    primary key (credential_id, key)
  )`,
  sql`create index idempotency_keys_expires_at_idx on idempotency_keys (expires_at)`,
  sql`create table instance_secrets (
    name text primary key,
    value text not null,
    inserted_at timestamptz(3) not null default now()
  )`,
];

export async function up(db: Kysely<any>): Promise<void> {
  for (const statement of statements) await statement.execute(db);
}
