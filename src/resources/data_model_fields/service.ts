import type { Selectable, Updateable } from 'kysely';
import type { Principal } from '../../auth/principal.ts';
import type { Db } from '../../db/connect.ts';
import type { DataModelFieldTable, FieldType } from '../../db/tables.ts';
import { AppError, fromPgError, invalidAt } from '../../errors.ts';
import { isUuid, uuidv7 } from '../../ids.ts';
import type { InputSchema } from '../../input.ts';
import type { Quotas } from '../../config.ts';
import { checkFieldCreate, countedWrite } from '../../quotas/quotas.ts';
import { findDataModel } from '../data_models/data-models.sql.ts';
import { FIELD_TYPES } from './resource.ts';
import { deleteFieldRow, FIELD_CONSTRAINTS, insertField, lockFieldWithModel, modelHasFacts, updateField } from './data-model-fields.sql.ts';
import { refuseIfUsed } from '../workflows/usage.ts';
import { createFieldIndex, dropFieldIndex, dropFieldStorage, SLOTTED_TYPES, type IndexBuild } from '../../facts/field-index.sql.ts';
import { freeSlots, slotKind } from '../../facts/slots.sql.ts';

/** Checked by readAttributes before a write sees attrs: the casts of its members in the writes below restate the kind each was checked to have. */
export const fieldInput: InputSchema = {
  data_model_id: { kind: 'string', required: true, max: 64 },
  name: {
    kind: 'string',
    required: true,
    max: 63,
    trim: false,
    pattern: /^[a-z][a-z0-9_]*$/,
    patternText: 'must start with a lowercase letter and contain only lowercase letters, digits and underscores',
  },
  label: { kind: 'string', nullable: true, max: 200 },
  description: { kind: 'string', nullable: true, max: 4000 },
  type: { kind: 'enum', nullable: true, values: FIELD_TYPES },
  is_primary_key: { kind: 'boolean', nullable: true },
  is_required: { kind: 'boolean', nullable: true },
  is_indexed: { kind: 'boolean', nullable: true },
  constraints: { kind: 'object', nullable: true, maxBytes: 16_384 },
};

const json = (v: unknown) => (v === null || v === undefined ? null : JSON.stringify(v));

/** An indexed field must have a type with typed storage, and its model a free slot of that kind (slots.sql.ts). */
async function checkIndexable(db: Db, indexed: boolean, type: FieldType | null, dataModelId: string, fieldId?: string): Promise<void> {
  if (!indexed) return;
  if (!SLOTTED_TYPES.has(type)) {
    throw invalidAt(
      '/data/attributes/is_indexed',
      `is_indexed applies to fields of type string, integer, float, boolean or datetime (their values are stored typed), not ${type ?? 'untyped'}`,
    );
  }
  const kind = slotKind(type)!;
  if ((await freeSlots(db, dataModelId, kind, fieldId)) === 0) {
    throw invalidAt(
      '/data/attributes/is_indexed',
      `the data model has no free typed slot for another indexed ${type} field (docs/architecture.md, Typed storage of indexed fields)`,
    );
  }
}

/**
 * `build`: how the index of an indexed field is built (field-index.sql.ts); the row is
 * written first, so a failed build leaves a field whose filters are right, only unindexed.
 */
/** `quotas`: the model's fields are counted first (QUOTA_FIELDS_PER_DATA_MODEL); a caller composing a fixture may leave them out. */
export async function createField(db: Db, principal: Principal, attrs: Record<string, unknown>, build: IndexBuild = 'plain', quotas?: Quotas) {
  const dataModelId = String(attrs.data_model_id).toLowerCase();
  // The same text whether the model is absent or in another workspace.
  const model = isUuid(dataModelId) ? await findDataModel(db, principal.workspaceId, { id: dataModelId }) : undefined;
  if (!model) throw invalidAt('/data/attributes/data_model_id', 'data_model_id does not name a data model of this workspace');
  const name = attrs.name as string;
  const type = (attrs.type as FieldType | null | undefined) ?? null;
  const indexed = (attrs.is_indexed as boolean | null | undefined) ?? false;
  await checkIndexable(db, indexed, type, model.id);
  let row;
  try {
    const check = async (trx: Db) => {
      if (quotas) await checkFieldCreate(trx, quotas, principal.workspaceId, model.id);
    };
    row = await countedWrite(db, check, (trx) =>
      insertField(trx, {
        id: uuidv7(),
        organization_id: model.organization_id,
        workspace_id: principal.workspaceId,
        data_model_id: model.id,
        name,
        label: (attrs.label as string | null | undefined) ?? name,
        description: (attrs.description as string | null | undefined) ?? null,
        type,
        is_primary_key: (attrs.is_primary_key as boolean | null | undefined) ?? false,
        is_required: (attrs.is_required as boolean | null | undefined) ?? false,
        is_indexed: indexed,
        constraints: json(attrs.constraints),
      }),
    );
  } catch (err) {
    throw fromPgError(err, FIELD_CONSTRAINTS);
  }
  if (row.is_indexed) await createFieldIndex(db, build, row);
  return row;
}

export async function patchField(
  db: Db,
  principal: Principal,
  existing: Selectable<DataModelFieldTable>,
  attrs: Record<string, unknown>,
  now: Date,
  build: IndexBuild = 'plain',
) {
  if (attrs.data_model_id !== undefined && String(attrs.data_model_id).toLowerCase() !== existing.data_model_id) {
    throw invalidAt('/data/attributes/data_model_id', 'A field cannot move to another data model');
  }
  const patch: Updateable<DataModelFieldTable> = {};
  if (attrs.name !== undefined) patch.name = attrs.name as string;
  if (attrs.label !== undefined) patch.label = (attrs.label as string | null) ?? (attrs.name as string | undefined) ?? existing.name;
  if (attrs.description !== undefined) patch.description = attrs.description as string | null;
  if (attrs.type !== undefined) patch.type = attrs.type as FieldType | null;
  if (attrs.is_primary_key !== undefined) patch.is_primary_key = (attrs.is_primary_key as boolean | null) ?? false;
  if (attrs.is_required !== undefined) patch.is_required = (attrs.is_required as boolean | null) ?? false;
  if (attrs.is_indexed !== undefined) patch.is_indexed = (attrs.is_indexed as boolean | null) ?? false;
  if (attrs.constraints !== undefined) patch.constraints = json(attrs.constraints);
  const typeChanges = patch.type !== undefined && patch.type !== existing.type;
  await checkIndexable(db, patch.is_indexed ?? existing.is_indexed, patch.type === undefined ? existing.type : patch.type, existing.data_model_id, existing.id);
  // A renamed or retyped field's slot holds the values of before: readers go back to `data`
  // in the same statement, until the rebuild below has filled it again.
  if ((patch.name !== undefined && patch.name !== existing.name) || typeChanges) patch.slot_ready = false;
  let row;
  try {
    row = await updateField(db, principal.workspaceId, existing.id, patch, now, typeChanges);
    if (!row) {
      if (typeChanges && (await modelHasFacts(db, existing.data_model_id))) {
        throw new AppError(
          'conflict',
          `type cannot change from ${existing.type ?? 'untyped'} to ${patch.type ?? 'untyped'}: the data model already has facts, whose ${existing.name} values were checked as ${existing.type ?? 'untyped'}, and filters on the field would compare them as the new type. Add a new field (or data model) for the new type instead.`,
          { source: { pointer: '/data/attributes/type' } },
        );
      }
      throw new AppError('not_found', 'No data_model_field with this id');
    }
  } catch (err) {
    throw fromPgError(err, FIELD_CONSTRAINTS);
  }
  // The index's expression names the field and its type: a rename or retype rebuilds it.
  const reshaped = row.name !== existing.name || row.type !== existing.type;
  if (!row.is_indexed && existing.is_indexed) await dropFieldStorage(db, build, row);
  // Setting is_indexed: true again rebuilds: the way out after a build that failed midway.
  if (row.is_indexed && (!existing.is_indexed || reshaped || attrs.is_indexed === true)) await createFieldIndex(db, build, row);
  return row;
}

/**
 * DELETE a field: 409 while a workflow that is not deleted maps a value to it (a write_fact
 * mapping of any saved version names it), and for the primary-key field of a model with
 * facts (their entities are keyed by it). Stored facts keep their values under its name.
 * An indexed field's index is dropped after the commit.
 */
export async function deleteField(db: Db, principal: Principal, id: string, build: IndexBuild): Promise<{ undropped: string[] }> {
  const field = await db.transaction().execute(async (trx) => {
    const f = await lockFieldWithModel(trx, principal.workspaceId, id);
    if (!f) throw new AppError('not_found', 'No data_model_field with this id');
    await refuseIfUsed(trx, principal.workspaceId, 'data_model_field', { kind: 'field', slug: f.slug, name: f.name });
    if (f.is_primary_key && (await modelHasFacts(trx, f.data_model_id)))
      throw new AppError('conflict', 'The primary-key field of a data model with facts cannot be deleted: its facts are keyed by it');
    await deleteFieldRow(trx, principal.workspaceId, id);
    return f;
  });
  if (!field.is_indexed) return { undropped: [] };
  try {
    await dropFieldIndex(db, build, field.id);
    return { undropped: [] };
  } catch {
    return { undropped: [field.id] };
  }
}
