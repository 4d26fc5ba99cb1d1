/**
 * Which workflows still use a connector, a data model, a field or an API specification:
 * what a DELETE refuses with 409. A workflow uses it when any saved version of it does
 * (a replay may run an old version), or, for an inbound connector, when one of its
 * triggers names it. Deleted workflows use nothing: their triggers are gone and their
 * versions never run again.
 */
import { VERSION_STEPS } from '../../runs/queue.sql.ts';
import { sql, type RawBuilder } from 'kysely';
import type { Db } from '../../db/connect.ts';

export interface UsingWorkflow {
  id: string;
  name: string;
}

/** How many using workflows a 409 names; past it, the detail says how many more. */
export const USING_NAMED = 10;

export type Use =
  | { kind: 'connector'; id: string }
  | { kind: 'data_model'; slug: string }
  | { kind: 'field'; slug: string; name: string }
  | { kind: 'api_spec'; connectorId: string };

/** The predicate on one saved step `s` (any step of a version: nested and on_failure ones too). */
function stepUses(use: Use): RawBuilder<boolean> {
  switch (use.kind) {
    case 'connector':
      return sql<boolean>`s->>'type' = 'http_request' and s->'config'->>'connector_id' = ${use.id}`;
    case 'data_model':
      return sql<boolean>`s->>'type' = 'write_fact' and s->'config'->>'data_model_slug' = ${use.slug}`;
    case 'field':
      // Only a mapping names its fields; a `data` expression's members are known when it runs.
      return sql<boolean>`s->>'type' = 'write_fact' and s->'config'->>'data_model_slug' = ${use.slug} and (s->'config'->'mapping'->>${use.name}) is not null`;
    case 'api_spec':
      // An operation_ref is resolved against the connector's specification.
      return sql<boolean>`s->>'type' = 'http_request' and s->'config'->>'connector_id' = ${use.connectorId} and (s->'config'->>'operation_ref') is not null`;
  }
}

/**
 * The workflows of the workspace (not deleted) that use it, by name, at most USING_NAMED + 1
 * (so the caller knows there are more), and how many there are in all.
 */
export async function workflowsUsing(db: Db, workspaceId: string, use: Use): Promise<{ named: UsingWorkflow[]; total: number }> {
  const trigger =
    use.kind === 'connector' ? sql`or exists (select 1 from workflow_triggers as t where t.workflow_id = w.id and t.inbound_connector_id = ${use.id})` : sql``;
  const { rows } = await sql<UsingWorkflow & { total: number }>`
    select w.id, w.name, count(*) over ()::int as total
    from workflows as w
    where w.workspace_id = ${workspaceId} and w.deleted_at is null
      and (exists (
        select 1 from workflow_versions as v, ${VERSION_STEPS} as s
        where v.workflow_id = w.id and ${stepUses(use)}
      ) ${trigger})
    order by w.name, w.id
    limit ${USING_NAMED}`.execute(db);
  return { named: rows.map(({ id, name }) => ({ id, name })), total: rows[0]?.total ?? 0 };
}
