import type { Db } from '../../db/connect.ts';

/** DELETE: false when the workspace has no widget of this id. */
export async function deleteWidget(db: Db, workspaceId: string, id: string): Promise<boolean> {
  const rows = await db.deleteFrom('dashboard_widgets').where('workspace_id', '=', workspaceId).where('id', '=', id).returning('id').execute();
  return rows.length > 0;
}
