import type { Selectable, Updateable } from 'kysely';
import type { Principal } from '../../auth/principal.ts';
import type { Db } from '../../db/connect.ts';
import type { DataModelFieldTable, FieldType } from '../../db/tables.ts';
import { AppError, fromPgError, invalidAt } from '../../errors.ts';
import { isUuid, uuidv7 } from '../../ids.ts';
import type { InputSchema } from '../../input.ts';
import { findDataModel } from '../data_models/data-models.sql.ts';
import { FIELD_TYPES } from './resource.ts';
import { FIELD_CONSTRAINTS, insertField, modelHasFacts, updateField } from './data-model-fields.sql.ts';

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
  constraints: { kind: 'object', nullable: true, maxBytes: 16_384 },
};

const json = (v: unknown) => (v === null || v === undefined ? null : JSON.stringify(v));

export async function createField(db: Db, principal: Principal, attrs: Record<string, unknown>) {
  const dataModelId = String(attrs.data_model_id).toLowerCase();
  // The same text whether the model is absent or in another workspace.
  const model = isUuid(dataModelId) ? await findDataModel(db, principal.workspaceId, { id: dataModelId }) : undefined;
  if (!model) throw invalidAt('/data/attributes/data_model_id', 'data_model_id does not name a data model of this workspace');
  const name = attrs.name as string;
  try {
    return await insertField(db, {
      id: uuidv7(),
      organization_id: model.organization_id,
      workspace_id: principal.workspaceId,
      data_model_id: model.id,
      name,
      label: (attrs.label as string | null | undefined) ?? name,
      description: (attrs.description as string | null | undefined) ?? null,
      type: (attrs.type as FieldType | null | undefined) ?? null,
      is_primary_key: (attrs.is_primary_key as boolean | null | undefined) ?? false,
      is_required: (attrs.is_required as boolean | null | undefined) ?? false,
      constraints: json(attrs.constraints),
    });
  } catch (err) {
    throw fromPgError(err, FIELD_CONSTRAINTS);
  }
}

export async function patchField(db: Db, principal: Principal, existing: Selectable<DataModelFieldTable>, attrs: Record<string, unknown>, now: Date) {
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
  if (attrs.constraints !== undefined) patch.constraints = json(attrs.constraints);
  const typeChanges = patch.type !== undefined && patch.type !== existing.type;
  try {
    const row = await updateField(db, principal.workspaceId, existing.id, patch, now, typeChanges);
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
    return row;
  } catch (err) {
    throw fromPgError(err, FIELD_CONSTRAINTS);
  }
}
