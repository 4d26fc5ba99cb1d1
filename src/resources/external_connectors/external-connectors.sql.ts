import type { Insertable, Updateable } from 'kysely';
import type { Db } from '../../db/connect.ts';
import type { ExternalConnectorTable } from '../../db/tables.ts';

export function insertConnector(db: Db, row: Insertable<ExternalConnectorTable>) {
  return db.insertInto('external_connectors').values(row).returningAll().executeTakeFirstOrThrow();
}

export function updateConnector(db: Db, workspaceId: string, id: string, patch: Updateable<ExternalConnectorTable>, now: Date) {
  return db
    .updateTable('external_connectors')
    .set({ ...patch, updated_at: now })
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirst();
}

/** The sealed secret of a connector of the workspace, for the code that calls out or verifies deliveries. */
export async function sealedSecret(db: Db, workspaceId: string, id: string): Promise<string | null | undefined> {
  const row = await db
    .selectFrom('external_connectors')
    .select('secret_ciphertext')
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .executeTakeFirst();
  return row?.secret_ciphertext;
}

/** The connector of the workspace, locked until the delete's transaction ends (a save using it waits, or is waited for). */
export function lockConnector(trx: Db, workspaceId: string, id: string) {
  return trx.selectFrom('external_connectors').select('id').where('workspace_id', '=', workspaceId).where('id', '=', id).forUpdate().executeTakeFirst();
}

/** DELETE: its specifications stay, detached; the connector row goes. */
export async function deleteConnectorRow(trx: Db, workspaceId: string, id: string): Promise<void> {
  await trx
    .updateTable('api_specs')
    .set({ external_connector_id: null })
    .where('workspace_id', '=', workspaceId)
    .where('external_connector_id', '=', id)
    .execute();
  await trx.deleteFrom('external_connectors').where('workspace_id', '=', workspaceId).where('id', '=', id).execute();
}
