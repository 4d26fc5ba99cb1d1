import type { Db } from '../../db/connect.ts';
import type { DataModelTable } from '../../db/tables.ts';
import type { Insertable, Updateable } from 'kysely';

export const DATA_MODEL_CONSTRAINTS: Readonly<Record<string, [string, string]>> = {
  data_models_org_slug_key: ['/data/attributes/slug', 'slug is already taken in this organization'],
};

export function insertDataModel(db: Db, row: Insertable<DataModelTable>) {
  return db.insertInto('data_models').values(row).returningAll().executeTakeFirstOrThrow();
}

export function updateDataModel(db: Db, workspaceId: string, id: string, patch: Updateable<DataModelTable>, now: Date) {
  return db
    .updateTable('data_models')
    .set({ ...patch, updated_at: now })
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirst();
}

/** A data model of the workspace by id or by slug (slugs are unique per organization). */
export function findDataModel(db: Db, workspaceId: string, ref: { id: string } | { slug: string }) {
  return db
    .selectFrom('data_models')
    .select(['id', 'organization_id'])
    .where('workspace_id', '=', workspaceId)
    .where('id' in ref ? 'id' : 'slug', '=', 'id' in ref ? ref.id : ref.slug)
    .executeTakeFirst();
}
