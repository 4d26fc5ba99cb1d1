import { sql, type Insertable, type Updateable } from 'kysely';
import type { Db } from '../../db/connect.ts';
import type { WorkflowConcurrency, WorkflowStep, WorkflowTable, WorkflowTriggerTable } from '../../db/tables.ts';

/** The workflow of the workspace, locked until the save's transaction ends. */
export function lockWorkflow(trx: Db, workspaceId: string, id: string) {
  return trx
    .selectFrom('workflows')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .where('deleted_at', 'is', null)
    .forUpdate()
    .executeTakeFirst();
}

export function insertWorkflow(trx: Db, row: Insertable<WorkflowTable>) {
  return trx.insertInto('workflows').values(row).returningAll().executeTakeFirstOrThrow();
}

export function updateWorkflow(trx: Db, workspaceId: string, id: string, patch: Updateable<WorkflowTable>) {
  return trx.updateTable('workflows').set(patch).where('workspace_id', '=', workspaceId).where('id', '=', id).returningAll().executeTakeFirstOrThrow();
}

/** The steps, concurrency and state key of a version and who saved them, replaced when a save keeps the version. */
export async function putVersion(
  trx: Db,
  workspaceId: string,
  v: {
    id: string;
    workflowId: string;
    version: number;
    steps: WorkflowStep[];
    onFailure: WorkflowStep[];
    concurrency: WorkflowConcurrency | null;
    stateKey: string | null;
    savedBy: string;
  },
): Promise<void> {
  await trx
    .insertInto('workflow_versions')
    .values({
      id: v.id,
      workspace_id: workspaceId,
      workflow_id: v.workflowId,
      version: v.version,
      steps: JSON.stringify(v.steps),
      on_failure: JSON.stringify(v.onFailure),
      concurrency: v.concurrency === null ? null : JSON.stringify(v.concurrency),
      state_key: v.stateKey,
      saved_by_membership_id: v.savedBy,
    })
    .onConflict((oc) =>
      oc.columns(['workflow_id', 'version']).doUpdateSet({
        steps: (eb) => eb.ref('excluded.steps'),
        on_failure: (eb) => eb.ref('excluded.on_failure'),
        concurrency: (eb) => eb.ref('excluded.concurrency'),
        state_key: (eb) => eb.ref('excluded.state_key'),
        saved_by_membership_id: (eb) => eb.ref('excluded.saved_by_membership_id'),
      }),
    )
    .execute();
}

/** A save that changed nothing still makes its member the version's saver. */
export async function recordSaver(trx: Db, workflowId: string, version: number, savedBy: string): Promise<void> {
  await trx
    .updateTable('workflow_versions')
    .set({ saved_by_membership_id: savedBy })
    .where('workflow_id', '=', workflowId)
    .where('version', '=', version)
    .where((eb) => eb.or([eb('saved_by_membership_id', 'is', null), eb('saved_by_membership_id', '!=', savedBy)]))
    .execute();
}

export function triggersOf(trx: Db, workspaceId: string, workflowId: string) {
  return trx
    .selectFrom('workflow_triggers')
    .select(['id', 'key', 'type', 'service_account_id', 'inbound_connector_id', 'cron', 'timezone'])
    .where('workspace_id', '=', workspaceId)
    .where('workflow_id', '=', workflowId)
    .execute();
}

export async function deleteTriggersExcept(trx: Db, workflowId: string, keep: string[]): Promise<void> {
  let q = trx.deleteFrom('workflow_triggers').where('workflow_id', '=', workflowId);
  if (keep.length > 0) q = q.where('id', 'not in', keep);
  await q.execute();
}

export async function updateTrigger(trx: Db, id: string, patch: Updateable<WorkflowTriggerTable>): Promise<void> {
  await trx.updateTable('workflow_triggers').set(patch).where('id', '=', id).execute();
}

export async function insertTriggers(trx: Db, rows: Insertable<WorkflowTriggerTable>[]): Promise<void> {
  if (rows.length > 0) await trx.insertInto('workflow_triggers').values(rows).execute();
}

/** Which of these ids are service accounts of the workspace that may act now (active, with an active run-as member). */
export async function activeAccounts(trx: Db, workspaceId: string, ids: string[]): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  const rows = await trx
    .selectFrom('service_accounts as sa')
    .innerJoin('org_memberships as m', 'm.id', 'sa.run_as_membership_id')
    .select('sa.id')
    .where('sa.workspace_id', '=', workspaceId)
    .where('sa.id', 'in', ids)
    .where('sa.is_active', '=', true)
    .where('m.is_active', '=', true)
    .where(sql<boolean>`m.organization_id = sa.organization_id`)
    .execute();
  return new Set(rows.map((r) => r.id));
}

/** Which of these ids are inbound connectors of the workspace. */
export async function inboundConnectors(trx: Db, workspaceId: string, ids: string[]): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  const rows = await trx
    .selectFrom('external_connectors')
    .select('id')
    .where('workspace_id', '=', workspaceId)
    .where('id', 'in', ids)
    .where('direction', '=', 'inbound')
    // Shared until the save commits: a connector DELETE (which locks the row for update) waits, then sees this version.
    .forShare()
    .execute();
  return new Set(rows.map((r) => r.id));
}

/** The outbound connectors of the workspace among these ids, with their attached specification's operations. */
export async function outboundConnectors(
  trx: Db,
  workspaceId: string,
  ids: string[],
): Promise<Map<string, { type: string | null; operations: unknown[] | null }>> {
  if (ids.length === 0) return new Map();
  const { rows } = await sql<{ id: string; type: string | null; operations: unknown[] | null }>`
    select c.id, c.type, s.operations
    from external_connectors as c
    left join lateral (
      select operations from api_specs where external_connector_id = c.id and workspace_id = c.workspace_id
      order by updated_at desc, id desc limit 1
    ) as s on true
    where c.workspace_id = ${workspaceId} and c.id = any(${ids}::uuid[]) and coalesce(c.direction, 'outbound') = 'outbound'
    for share of c`.execute(trx);
  return new Map(rows.map((r) => [r.id, { type: r.type, operations: r.operations }]));
}

/**
 * Holds the workspace's data models of these slugs until the save commits, so that a data
 * model DELETE (which locks its row for update, then looks for the versions using it)
 * either waits and then sees this save's version, or commits first and this save finds no model.
 */
export async function shareModels(trx: Db, workspaceId: string, slugs: string[]): Promise<void> {
  if (slugs.length > 0)
    await trx.selectFrom('data_models').select('id').where('workspace_id', '=', workspaceId).where('slug', 'in', slugs).forShare().execute();
}

/** DELETE: the row stays for its runs, hidden (deleted_at) and inactive. */
export async function markWorkflowDeleted(trx: Db, workspaceId: string, id: string, now: Date): Promise<void> {
  await trx
    .updateTable('workflows')
    .set({ deleted_at: now, is_active: false, updated_at: now })
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .execute();
}
