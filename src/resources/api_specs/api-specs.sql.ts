import type { Insertable, Updateable } from 'kysely';
import type { Db } from '../../db/connect.ts';
import type { ApiSpecTable } from '../../db/tables.ts';

export function insertApiSpec(db: Db, row: Insertable<ApiSpecTable>) {
  return db.insertInto('api_specs').values(row).returningAll().executeTakeFirstOrThrow();
}

export function updateApiSpec(db: Db, workspaceId: string, id: string, patch: Updateable<ApiSpecTable>, now: Date) {
  return db
    .updateTable('api_specs')
    .set({ ...patch, updated_at: now })
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirst();
}

/** Whether the id names a connector of the workspace. */
export async function connectorInWorkspace(db: Db, workspaceId: string, id: string): Promise<boolean> {
  const row = await db.selectFrom('external_connectors').select('id').where('workspace_id', '=', workspaceId).where('id', '=', id).executeTakeFirst();
  return row !== undefined;
}

/** The specification of the workspace, locked for its delete; with its connector. */
export function lockApiSpec(trx: Db, workspaceId: string, id: string) {
  return trx
    .selectFrom('api_specs')
    .select(['id', 'external_connector_id'])
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .forUpdate()
    .executeTakeFirst();
}

/** Whether the connector keeps another specification once this one is gone. */
export async function otherSpecOf(trx: Db, workspaceId: string, connectorId: string, exceptId: string): Promise<boolean> {
  const row = await trx
    .selectFrom('api_specs')
    .select('id')
    .where('workspace_id', '=', workspaceId)
    .where('external_connector_id', '=', connectorId)
    .where('id', '!=', exceptId)
    .limit(1)
    .executeTakeFirst();
  return row !== undefined;
}

export async function deleteApiSpecRow(trx: Db, workspaceId: string, id: string): Promise<void> {
  await trx.deleteFrom('api_specs').where('workspace_id', '=', workspaceId).where('id', '=', id).execute();
}
