import { sql, type Kysely } from 'kysely';

/**
 * Facts are append-only history. fact_current holds, per data model, time axis and entity,
 * the one latest fact (data copied in), maintained on write, so latest-mode reads never
 * scan history unless an as-of `until` asks for it.
 */
const statements = [
  sql`create table facts (
    id uuid primary key,
    organization_id uuid not null references organizations (id),
    workspace_id uuid not null references workspaces (id),
    data_model_id uuid not null references data_models (id),
    entity_id text,
    observed_at timestamptz(3) not null,
    inserted_at timestamptz(3) not null default now(),
    data jsonb not null,
    source_key text not null,
    constraint facts_model_source_key unique (data_model_id, source_key)
  )`,
  // Timeline windows on either axis, newest first, ties by id. workspace_id is carried in
  // the index (the planner also checks it) so a window's count is an index-only scan
  // instead of a visit to every fact of the window.
  sql`create index facts_model_observed_idx on facts (data_model_id, observed_at, id) include (workspace_id)`,
  sql`create index facts_model_inserted_idx on facts (data_model_id, inserted_at, id) include (workspace_id)`,
  // As-of latest (until given): the newest fact per entity at or before a time.
  sql`create index facts_model_entity_observed_idx on facts (data_model_id, entity_id, observed_at desc, inserted_at desc, id desc)`,
  sql`create index facts_model_entity_inserted_idx on facts (data_model_id, entity_id, inserted_at desc, id desc)`,
  sql`create table fact_current (
    data_model_id uuid not null references data_models (id),
    axis text not null check (axis in ('observed_at', 'inserted_at')),
    entity_key text not null,
    fact_id uuid not null,
    workspace_id uuid not null,
    entity_id text,
    observed_at timestamptz(3) not null,
    inserted_at timestamptz(3) not null,
    data jsonb not null,
    primary key (data_model_id, axis, entity_key)
  )`,
  // Latest pages in observed_at order, and `since` on either axis; workspace_id included for
  // index-only counts when no filter needs the data.
  sql`create index fact_current_observed_idx on fact_current (data_model_id, axis, observed_at, fact_id) include (workspace_id)`,
  sql`create index fact_current_inserted_idx on fact_current (data_model_id, axis, inserted_at, fact_id) include (workspace_id)`,
  sql`create index fact_current_fact_idx on fact_current (fact_id)`,
];

export async function up(db: Kysely<any>): Promise<void> {
  for (const statement of statements) await statement.execute(db);
}
