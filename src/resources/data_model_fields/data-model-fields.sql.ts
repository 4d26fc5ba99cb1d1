import type { Insertable, Updateable } from 'kysely';
import type { Db } from '../../db/connect.ts';
import type { DataModelFieldTable } from '../../db/schema.ts';

export const FIELD_CONSTRAINTS: Readonly<Record<string, [string, string]>> = {
  data_model_fields_model_name_key: ['/data/attributes/name', 'a field with this name already exists in the data model'],
  data_model_fields_one_primary_key: ['/data/attributes/is_primary_key', 'the data model already has a primary-key field'],
};

export function insertField(db: Db, row: Insertable<DataModelFieldTable>) {
  return db.insertInto('data_model_fields').values(row).returningAll().executeTakeFirstOrThrow();
}

export function updateField(db: Db, workspaceId: string, id: string, patch: Updateable<DataModelFieldTable>) {
  return db
    .updateTable('data_model_fields')
    .set({ ...patch, updated_at: new Date() })
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirst();
}
