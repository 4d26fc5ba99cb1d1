/**
 * The one loader of data models with their fields, for every reader and writer of facts
 * (the factQuery planner, the import, the worker's write step, a workflow's save).
 */
import { sql, type RawBuilder } from 'kysely';
import type { Db } from '../db/connect.ts';
import type { FieldType } from '../db/tables.ts';

export interface ModelField {
  name: string;
  type: FieldType | null;
  is_primary_key: boolean;
  is_required: boolean;
  /** Has an index on fact_current (field-index.sql.ts); absent in models read before migration 0017's column. */
  is_indexed?: boolean;
  /** The typed slot (slots.sql.ts) that holds the field's value on every stored fact; null or absent: read `data`. */
  slot?: string | null;
}

export interface DataModelWithFields {
  id: string;
  organization_id: string;
  workspace_id: string;
  slug: string;
  /** By name. */
  fields: ModelField[];
}

/**
 * The models of these slugs in one workspace, with their fields, as one row holding a JSON
 * array (a slug of another workspace is simply absent). One fixed text whatever the number
 * of slugs, so that it can run inside the account re-check's statement (loadAccountWith)
 * as well as on its own.
 */
/**
 * A digest of the models of these slugs in one workspace as they are now: ids, slugs and
 * fields. A reader that kept the models from an earlier request checks, in its own
 * statement, that they have not changed since.
 */
export function modelsFingerprint(workspaceId: string, slugs: readonly string[]): RawBuilder<string> {
  return sql<string>`(select md5(coalesce(string_agg(fm.id::text || '/' || fm.slug || '/' || coalesce((select string_agg(ff.name || ':' || coalesce(ff.type::text, '') || ':' || ff.is_primary_key::text || ':' || ff.is_required::text || ':' || ff.is_indexed::text || ':' || coalesce(case when ff.slot_ready then ff.slot end, ''), ',' order by ff.name)
      from data_model_fields as ff where ff.data_model_id = fm.id), ''), ';' order by fm.slug), ''))
    from data_models as fm where fm.workspace_id = ${workspaceId} and fm.slug = any(${[...slugs]}::text[]))`;
}

/** The fields of the data model `m` as a JSON array of ModelField, by name. */
const FIELDS_OF_M = sql`(select coalesce(json_agg(json_build_object('name', f.name, 'type', f.type, 'is_primary_key', f.is_primary_key, 'is_required', f.is_required, 'is_indexed', f.is_indexed, 'slot', case when f.slot_ready then f.slot end) order by f.name), '[]'::json)
    from data_model_fields as f where f.data_model_id = m.id)`;

/**
 * A scalar subquery: the models (DataModelWithFields[]) of the workspace `workspaceRef`
 * whose slugs `slugs` (a set-returning SQL expression) gives. For a statement that reads
 * the models alongside other rows (the worker's claim reads each run's models with it).
 */
export function modelsJson(workspaceRef: RawBuilder<unknown>, slugs: RawBuilder<unknown>): RawBuilder<DataModelWithFields[]> {
  return sql<
    DataModelWithFields[]
  >`(select coalesce(json_agg(json_build_object('id', m.id, 'organization_id', m.organization_id, 'workspace_id', m.workspace_id, 'slug', m.slug, 'fields', ${FIELDS_OF_M})), '[]'::json)
    from data_models as m where m.workspace_id = ${workspaceRef} and m.slug in (${slugs}))`;
}

export function modelsQuery(db: Db, workspaceId: string, slugs: string[]) {
  const fields = FIELDS_OF_M;
  return db
    .selectFrom('data_models as m')
    .where('m.workspace_id', '=', workspaceId)
    .where(sql<boolean>`m.slug = any(${slugs}::text[])`)
    .select([
      // loadAccountWith tells "no row" by a null id; an aggregate always has its one row.
      sql<string>`'models'`.as('id'),
      sql<
        DataModelWithFields[]
      >`coalesce(json_agg(json_build_object('id', m.id, 'organization_id', m.organization_id, 'workspace_id', m.workspace_id, 'slug', m.slug, 'fields', ${fields})), '[]'::json)`.as(
        'models',
      ),
      modelsFingerprint(workspaceId, slugs).as('fingerprint'),
    ]);
}

/** The models by slug. */
export function modelMap(models: readonly DataModelWithFields[]): Map<string, DataModelWithFields> {
  return new Map(models.map((m) => [m.slug, m]));
}

export async function loadModels(db: Db, workspaceId: string, slugs: string[]): Promise<Map<string, DataModelWithFields>> {
  const row = await modelsQuery(db, workspaceId, slugs).executeTakeFirstOrThrow();
  return modelMap(row.models);
}

/** The models of these slugs with their fingerprint (modelsFingerprint), for a reader that remembers them. */
export async function loadModelsFingerprinted(
  db: Db,
  workspaceId: string,
  slugs: string[],
): Promise<{ models: Map<string, DataModelWithFields>; fingerprint: string }> {
  const row = await modelsQuery(db, workspaceId, slugs).executeTakeFirstOrThrow();
  return { models: modelMap(row.models), fingerprint: row.fingerprint };
}

export async function loadModel(db: Db, workspaceId: string, slug: string): Promise<DataModelWithFields | undefined> {
  return (await loadModels(db, workspaceId, [slug])).get(slug);
}
