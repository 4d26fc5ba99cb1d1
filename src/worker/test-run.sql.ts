/** What a test run reads: one version of a workspace's workflow, with what claimRuns reads beside a run's steps. */
import { sql } from 'kysely';
import type { Db } from '../db/connect.ts';
import type { Role, WorkflowStep } from '../db/tables.ts';
import { modelsJson, type DataModelWithFields } from '../facts/models.sql.ts';
import { VERSION_STEPS } from '../runs/queue.sql.ts';
import { STATE_KEY, WORKFLOW_STATE } from '../runs/state.sql.ts';

export interface TestedVersion {
  workflow_id: string;
  organization_id: string;
  workspace_id: string;
  version: number;
  definition: WorkflowStep[];
  on_failure: WorkflowStep[];
  models: DataModelWithFields[];
  saver: { role: Role; is_active: boolean } | null;
  /** The headers the api_key inbound connectors of its triggers read their keys from: a sample's are redacted as a delivery's are. */
  secretHeaders: string[];
  /** The workflow's state document as it is now: a test run reads it, never writes it. */
  state: unknown;
  /** The version's state key expression (null: none): a test run reads the document of the key its sample gives. */
  state_key: string | null;
}

/** The version (none: the workflow's current one) of the workflow, when both exist in the workspace. */
export async function loadTestedVersion(db: Db, workspaceId: string, workflowId: string, version: number | undefined): Promise<TestedVersion | undefined> {
  const { rows } = await sql<TestedVersion>`
    select w.id as workflow_id, w.organization_id, w.workspace_id, v.version, v.steps as definition, v.on_failure, v.state_key,
      ${modelsJson(sql`w.workspace_id`, sql`select s->'config'->>'data_model_slug' from ${VERSION_STEPS} as s where s->>'type' = 'write_fact'`)} as models,
      (select json_build_object('role', m.role, 'is_active', m.is_active) from org_memberships as m
        where m.id = v.saved_by_membership_id and m.organization_id = w.organization_id) as saver,
      (select coalesce(json_agg(c.config->>'header_name'), '[]'::json) from workflow_triggers as t
        join external_connectors as c on c.id = t.inbound_connector_id and c.workspace_id = t.workspace_id
        where t.workflow_id = w.id and t.workspace_id = w.workspace_id and c.auth_type = 'api_key' and jsonb_typeof(c.config->'header_name') = 'string') as "secretHeaders",
      ${WORKFLOW_STATE} as state
    from workflows as w
    join workflow_versions as v on v.workflow_id = w.id and v.version = coalesce(${version ?? null}::int, w.version)
    where w.id = ${workflowId} and w.workspace_id = ${workspaceId} and w.deleted_at is null`.execute(db);
  return rows[0];
}

/** What a test run of a file reads beside its steps: the data models its write_fact steps name, and its api_key connectors' key headers. */
export async function fileContext(
  db: Db,
  workspaceId: string,
  slugs: string[],
  connectorIds: string[],
  workflowId: string | null,
): Promise<{ models: DataModelWithFields[]; secretHeaders: string[]; state: unknown }> {
  const { rows } = await sql<{ models: DataModelWithFields[]; secretHeaders: string[]; state: unknown }>`
    select ${modelsJson(sql`${workspaceId}::uuid`, slugs.length > 0 ? sql`${sql.join(slugs)}` : sql`null`)} as models,
      (select coalesce(json_agg(c.config->>'header_name'), '[]'::json) from external_connectors as c
        where c.workspace_id = ${workspaceId} and c.id = any(${connectorIds}::uuid[]) and c.auth_type = 'api_key'
          and jsonb_typeof(c.config->'header_name') = 'string') as "secretHeaders",
      (select s.value from workflow_state as s where s.workspace_id = ${workspaceId} and s.workflow_id = ${workflowId}::uuid and s.key = ${STATE_KEY}) as state`.execute(
    db,
  );
  return rows[0]!;
}
