import { sql, type Kysely } from 'kysely';

/**
 * API specifications: an uploaded OpenAPI or Swagger document kept verbatim, with the
 * fields the service derives from it (servers, security schemes, operations with their
 * schemas and fingerprints), so that a workflow step can name an operation and a new
 * upload can be compared with the last.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table api_specs (
      id uuid primary key,
      organization_id uuid not null references organizations (id),
      workspace_id uuid not null references workspaces (id),
      name text not null,
      format text not null check (format in ('json', 'yaml')),
      raw_document text not null,
      external_connector_id uuid references external_connectors (id),
      openapi_version text,
      title text,
      version text,
      servers jsonb not null default '[]',
      security_schemes jsonb not null default '{}',
      operations jsonb not null default '[]',
      provider_slug text,
      inserted_at timestamptz(3) not null default now(),
      updated_at timestamptz(3) not null default now()
    )
  `.execute(db);
  await sql`create index api_specs_workspace_idx on api_specs (workspace_id, inserted_at, id)`.execute(db);
  await sql`create index api_specs_connector_idx on api_specs (external_connector_id) where external_connector_id is not null`.execute(db);
}
