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

/** The model of the workspace, locked for its delete: fact writers (their foreign key) and saves naming it wait. */
export function lockDataModel(trx: Db, workspaceId: string, id: string) {
  return trx.selectFrom('data_models').select(['id', 'slug']).where('workspace_id', '=', workspaceId).where('id', '=', id).forUpdate().executeTakeFirst();
}

/**
 * DELETE: the model with its facts, current facts, fields and dashboard widgets, one
 * statement per table in the caller's transaction, not batches: only writers of this model
 * wait for it (the caller locked the model row), and a batched delete would leave a model
 * half gone. Returns the ids of its indexed fields, whose indexes the caller drops after commit.
 */
export async function deleteDataModelRows(trx: Db, workspaceId: string, id: string): Promise<string[]> {
  await trx.deleteFrom('fact_current').where('data_model_id', '=', id).where('workspace_id', '=', workspaceId).execute();
  await trx.deleteFrom('facts').where('data_model_id', '=', id).where('workspace_id', '=', workspaceId).execute();
  await trx.deleteFrom('dashboard_widgets').where('data_model_id', '=', id).where('workspace_id', '=', workspaceId).execute();
  const fields = await trx
    .deleteFrom('data_model_fields')
    .where('data_model_id', '=', id)
    .where('workspace_id', '=', workspaceId)
    .returning(['id', 'is_indexed'])
    .execute();
  await trx.deleteFrom('data_models').where('workspace_id', '=', workspaceId).where('id', '=', id).execute();
  return fields.filter((f) => f.is_indexed).map((f) => f.id);
}
