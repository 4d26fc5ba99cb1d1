import { sql, type Kysely } from 'kysely';

/**
 * External connectors: how the service reaches a provider, or how a provider's deliveries
 * are verified. The secret is kept only encrypted (AES-256-GCM under the installation's
 * connector key); has_secret is what reads show of it.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table external_connectors (
      id uuid primary key,
      organization_id uuid not null references organizations (id),
      workspace_id uuid not null references workspaces (id),
      name text not null,
      auth_type text not null check (auth_type in ('none', 'oauth2', 'api_key', 'bearer_token', 'basic_auth', 'hmac')),
      type text check (type in ('http', 's3', 'snowflake')),
      direction text check (direction in ('inbound', 'outbound')),
      status text not null default 'unverified' check (status in ('unverified', 'verified', 'failing')),
      config jsonb,
      description text,
      provider_slug text,
      secret_ciphertext text,
      has_secret boolean generated always as (secret_ciphertext is not null) stored,
      last_verified_at timestamptz(3),
      last_error text,
      inserted_at timestamptz(3) not null default now(),
      updated_at timestamptz(3) not null default now()
    )
  `.execute(db);
  await sql`create index external_connectors_workspace_idx on external_connectors (workspace_id, inserted_at, id)`.execute(db);
}
