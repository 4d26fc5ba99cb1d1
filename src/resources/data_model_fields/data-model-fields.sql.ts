import type { Insertable, Updateable } from 'kysely';
import type { Db } from '../../db/connect.ts';
import type { DataModelFieldTable } from '../../db/tables.ts';

export const FIELD_CONSTRAINTS: Readonly<Record<string, [string, string]>> = {
  data_model_fields_model_name_key: ['/data/attributes/name', 'a field with this name already exists in the data model'],
  data_model_fields_one_primary_key: ['/data/attributes/is_primary_key', 'the data model already has a primary-key field'],
};

export function insertField(db: Db, row: Insertable<DataModelFieldTable>) {
  return db.insertInto('data_model_fields').values(row).returningAll().executeTakeFirstOrThrow();
}

/**
 * `onlyWithoutFacts`: the update applies only while the field's data model has no facts,
 * tested in the same statement. Undefined means the field is gone or the model has facts.
 */
export function updateField(db: Db, workspaceId: string, id: string, patch: Updateable<DataModelFieldTable>, now: Date, onlyWithoutFacts = false) {
  let q = db
    .updateTable('data_model_fields')
    .set({ ...patch, updated_at: now })
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id);
  if (onlyWithoutFacts) {
    q = q.where(({ not, exists, selectFrom }) =>
      not(exists(selectFrom('facts').select('facts.id').whereRef('facts.data_model_id', '=', 'data_model_fields.data_model_id'))),
    );
  }
  return q.returningAll().executeTakeFirst();
}

export async function modelHasFacts(db: Db, dataModelId: string): Promise<boolean> {
  const row = await db.selectFrom('facts').select('id').where('data_model_id', '=', dataModelId).limit(1).executeTakeFirst();
  return row !== undefined;
}

/**
 * The field of the workspace with its model's slug, for its delete. The model row is locked
 * first (no key update: a save naming the model, which holds it for share, is waited for or
 * waits; fact writers, whose foreign key takes a key share, are not held), then the field:
 * the order a model's delete takes them in too, so the two never deadlock.
 */
export async function lockFieldWithModel(trx: Db, workspaceId: string, id: string) {
  const field = await trx
    .selectFrom('data_model_fields')
    .select('data_model_id')
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .executeTakeFirst();
  if (!field) return undefined;
  await trx.selectFrom('data_models').select('id').where('id', '=', field.data_model_id).forNoKeyUpdate().execute();
  return trx
    .selectFrom('data_model_fields as f')
    .innerJoin('data_models as m', 'm.id', 'f.data_model_id')
    .select(['f.id', 'f.name', 'f.data_model_id', 'f.is_primary_key', 'f.is_indexed', 'm.slug'])
    .where('f.workspace_id', '=', workspaceId)
    .where('f.id', '=', id)
    .forUpdate('f')
    .executeTakeFirst();
}

export async function deleteFieldRow(trx: Db, workspaceId: string, id: string): Promise<void> {
  await trx.deleteFrom('data_model_fields').where('workspace_id', '=', workspaceId).where('id', '=', id).execute();
}
