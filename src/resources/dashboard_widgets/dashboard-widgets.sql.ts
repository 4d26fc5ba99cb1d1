import type { Insertable, Updateable } from 'kysely';
import type { Db } from '../../db/connect.ts';
import type { DashboardWidgetTable } from '../../db/tables.ts';

export function insertWidget(db: Db, row: Insertable<DashboardWidgetTable>) {
  return db.insertInto('dashboard_widgets').values(row).returningAll().executeTakeFirstOrThrow();
}

/** Undefined when the workspace has no widget of this id (any more). */
export function updateWidget(db: Db, workspaceId: string, id: string, patch: Updateable<DashboardWidgetTable>, now: Date) {
  return db
    .updateTable('dashboard_widgets')
    .set({ ...patch, updated_at: now })
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirst();
}

/** DELETE: false when the workspace has no widget of this id. */
export async function deleteWidget(db: Db, workspaceId: string, id: string): Promise<boolean> {
  const rows = await db.deleteFrom('dashboard_widgets').where('workspace_id', '=', workspaceId).where('id', '=', id).returning('id').execute();
  return rows.length > 0;
}
