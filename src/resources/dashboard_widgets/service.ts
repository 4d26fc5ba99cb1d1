/**
 * Dashboard widget placements: an admin or owner places, changes and deletes them (the
 * route's permission, auth/access.ts); kind, position and config are checked by
 * config.ts, the same check the admin API's `widget create` runs.
 */
import type { Selectable, Updateable } from 'kysely';
import type { Principal } from '../../auth/principal.ts';
import type { Db } from '../../db/connect.ts';
import type { DashboardWidgetTable } from '../../db/tables.ts';
import { AppError, fromPgError, invalidAt } from '../../errors.ts';
import { isUuid, uuidv7 } from '../../ids.ts';
import type { InputSchema } from '../../input.ts';
import { findDataModel } from '../data_models/data-models.sql.ts';
import { checkWidget, CONFIG_SCHEMA, POSITION_SCHEMA, WIDGET_KINDS } from './config.ts';
import { deleteWidget, insertWidget, updateWidget } from './dashboard-widgets.sql.ts';

/** Checked by readAttributes first; kind, position and config then by checkWidget. */
export const widgetInput: InputSchema = {
  dashboard: { kind: 'string', max: 100, pattern: /./, patternText: 'must not be empty' },
  kind: { kind: 'enum', required: true, values: WIDGET_KINDS },
  title: { kind: 'string', nullable: true, max: 200 },
  data_model_id: { kind: 'string', required: true, max: 64 },
  position: { kind: 'object', nullable: true, maxBytes: 1_024, schema: POSITION_SCHEMA },
  config: { kind: 'object', nullable: true, maxBytes: 65_536, schema: CONFIG_SCHEMA },
};

const at = (name: string) => `/data/attributes/${name}`;

/** The model of the workspace the widget reads; the same text whether it is absent or another workspace's. */
async function modelOf(db: Db, principal: Principal, id: unknown) {
  const dataModelId = String(id).toLowerCase();
  const model = isUuid(dataModelId) ? await findDataModel(db, principal.workspaceId, { id: dataModelId }) : undefined;
  if (!model) throw invalidAt(at('data_model_id'), 'data_model_id does not name a data model of this workspace');
  return model;
}

export async function createDashboardWidget(db: Db, principal: Principal, attrs: Record<string, unknown>) {
  const model = await modelOf(db, principal, attrs.data_model_id);
  const { kind, position, config } = checkWidget(attrs, undefined, at);
  try {
    return await insertWidget(db, {
      id: uuidv7(),
      organization_id: model.organization_id,
      workspace_id: principal.workspaceId,
      data_model_id: model.id,
      dashboard: (attrs.dashboard as string | undefined) ?? 'home',
      kind,
      title: (attrs.title as string | null | undefined) ?? null,
      position: JSON.stringify(position),
      config: JSON.stringify(config),
    });
  } catch (err) {
    throw fromPgError(err);
  }
}

export async function patchDashboardWidget(
  db: Db,
  principal: Principal,
  existing: Selectable<DashboardWidgetTable>,
  attrs: Record<string, unknown>,
  now: Date,
) {
  const patch: Updateable<DashboardWidgetTable> = {};
  if (attrs.data_model_id !== undefined && String(attrs.data_model_id).toLowerCase() !== existing.data_model_id)
    patch.data_model_id = (await modelOf(db, principal, attrs.data_model_id)).id;
  // The widget as it will be is checked whole: a new kind against the stored config, a new config against the stored kind.
  const { kind, position, config } = checkWidget(attrs, existing, at);
  if (attrs.dashboard !== undefined) patch.dashboard = attrs.dashboard as string;
  if (attrs.title !== undefined) patch.title = attrs.title as string | null;
  if (attrs.kind !== undefined) patch.kind = kind;
  if (attrs.position !== undefined) patch.position = JSON.stringify(position);
  if (attrs.config !== undefined) patch.config = JSON.stringify(config);
  let row;
  try {
    row = await updateWidget(db, principal.workspaceId, existing.id, patch, now);
  } catch (err) {
    throw fromPgError(err);
  }
  if (!row) throw new AppError('not_found', 'No dashboard_widget with this id');
  return row;
}

/** DELETE a widget placement: nothing else refers to one. */
export async function deleteDashboardWidget(db: Db, principal: Principal, id: string): Promise<void> {
  if (!(await deleteWidget(db, principal.workspaceId, id))) throw new AppError('not_found', 'No dashboard_widget with this id');
}
