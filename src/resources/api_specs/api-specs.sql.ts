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
