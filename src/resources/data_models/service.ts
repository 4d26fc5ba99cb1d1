import type { Selectable } from 'kysely';
import type { Principal } from '../../auth/principal.ts';
import type { Db } from '../../db/connect.ts';
import type { DataModelTable } from '../../db/tables.ts';
import { AppError, fromPgError, invalidAt } from '../../errors.ts';
import { uuidv7 } from '../../ids.ts';
import { SLUG_RE, type InputSchema } from '../../input.ts';
import type { Quotas } from '../../config.ts';
import { checkDataModelCreate, countedWrite } from '../../quotas/quotas.ts';
import { DATA_MODEL_CONSTRAINTS, deleteDataModelRows, insertDataModel, lockDataModel, updateDataModel } from './data-models.sql.ts';
import { refuseIfUsed } from '../workflows/usage.ts';
import { dropFieldIndex, type IndexBuild } from '../../facts/field-index.sql.ts';

/** Checked by readAttributes before a write sees attrs: the casts of its members in the writes below restate the kind each was checked to have. */
export const dataModelInput: InputSchema = {
  name: { kind: 'string', required: true, max: 200 },
  slug: { kind: 'string', required: true, max: 63, pattern: SLUG_RE, patternText: 'must be 1-63 lowercase letters, digits or hyphens', trim: false },
  description: { kind: 'string', nullable: true, max: 4000 },
  organization_id: { kind: 'string', nullable: true, max: 64 },
  retention_days: { kind: 'integer', nullable: true, min: 1, max: 36_500 },
};

/** An organization_id other than the caller's is refused with one text, whether it exists or not. */
export function checkOrganization(principal: Principal, value: unknown): void {
  if (value !== undefined && value !== null && (typeof value !== 'string' || value.toLowerCase() !== principal.organizationId)) {
    throw invalidAt('/data/attributes/organization_id', "organization_id must be the caller's organization");
  }
}

/** `quotas`: the workspace's data models are counted first (QUOTA_DATA_MODELS); a caller composing a fixture may leave them out. */
export async function createDataModel(db: Db, principal: Principal, attrs: Record<string, unknown>, quotas?: Quotas) {
  checkOrganization(principal, attrs.organization_id);
  const check = async (trx: Db) => {
    if (quotas) await checkDataModelCreate(trx, quotas, principal.workspaceId);
  };
  try {
    return await countedWrite(db, check, (trx) =>
      insertDataModel(trx, {
        id: uuidv7(),
        organization_id: principal.organizationId,
        workspace_id: principal.workspaceId,
        name: attrs.name as string,
        slug: attrs.slug as string,
        description: (attrs.description as string | null | undefined) ?? null,
        retention_days: (attrs.retention_days as number | null | undefined) ?? null,
      }),
    );
  } catch (err) {
    throw fromPgError(err, DATA_MODEL_CONSTRAINTS);
  }
}

export async function patchDataModel(db: Db, principal: Principal, existing: Selectable<DataModelTable>, attrs: Record<string, unknown>, now: Date) {
  checkOrganization(principal, attrs.organization_id);
  const { organization_id: _org, ...patch } = attrs;
  try {
    const row = await updateDataModel(db, principal.workspaceId, existing.id, patch, now);
    if (!row) throw new AppError('not_found', 'No data_model with this id');
    return row;
  } catch (err) {
    throw fromPgError(err, DATA_MODEL_CONSTRAINTS);
  }
}

/**
 * DELETE a data model with its facts, fields and dashboard widgets: 409 while a workflow
 * that is not deleted writes to it (a write_fact step of any saved version names its slug).
 * The rows go in one transaction; the indexes of its indexed fields are dropped after the
 * commit (concurrently on PostgreSQL, holding no lock on fact_current meanwhile). Returns
 * the indexes that could not be dropped (empty, their model gone), for the caller to log.
 */
export async function deleteDataModel(db: Db, principal: Principal, id: string, build: IndexBuild): Promise<{ undropped: string[] }> {
  const indexed = await db.transaction().execute(async (trx) => {
    const model = await lockDataModel(trx, principal.workspaceId, id);
    if (!model) throw new AppError('not_found', 'No data_model with this id');
    await refuseIfUsed(trx, principal.workspaceId, 'data_model', { kind: 'data_model', slug: model.slug });
    return deleteDataModelRows(trx, principal.workspaceId, id);
  });
  const undropped: string[] = [];
  for (const fieldId of indexed) {
    try {
      await dropFieldIndex(db, build, fieldId);
    } catch {
      undropped.push(fieldId);
    }
  }
  return { undropped };
}
