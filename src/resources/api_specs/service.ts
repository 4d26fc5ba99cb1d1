/**
 * API specifications: an upload (name, format, raw_document) or a bundled provider's
 * document (provider_slug alone) is parsed, validated and normalized before it is stored;
 * an update with a new document is normalized again and answers with what changed in
 * its operations (meta.changes). Any member of the workspace may write them.
 */
import type { Principal } from '../../auth/principal.ts';
import type { Db } from '../../db/connect.ts';
import type { ApiSpecTable, SpecLastChanges } from '../../db/tables.ts';
import { AppError, fromPgError, invalidAt } from '../../errors.ts';
import { isUuid, uuidv7 } from '../../ids.ts';
import { SLUG_RE, type InputSchema } from '../../input.ts';
import type { SpecImporter } from '../../openapi/import-pool.ts';
import { diffOperations, type NormalizedSpec } from '../../openapi/normalize.ts';
import { DocumentProblem } from '../../openapi/parse.ts';
import { findProvider } from '../../providers/catalog.ts';
import type { Insertable, Selectable, Updateable } from 'kysely';
import { checkOrganization } from '../data_models/service.ts';
import { SPEC_FORMATS } from './resource.ts';
import { connectorInWorkspace, deleteApiSpecRow, insertApiSpec, lockApiSpec, otherSpecOf, updateApiSpec } from './api-specs.sql.ts';
import { refuseIfUsed } from '../workflows/usage.ts';

export interface SpecWriteOptions {
  allowPrivateEgress: boolean;
  /** Largest raw_document in bytes (API_SPEC_MAX_BYTES). */
  maxBytes: number;
  /** Most operations of a document (API_SPEC_MAX_OPERATIONS). */
  maxOperations: number;
  importer: SpecImporter;
}

/** Checked by readAttributes before a write sees attrs: the casts of its members in the writes below restate the kind each was checked to have. */
export function apiSpecInput(maxBytes: number): InputSchema {
  return {
    name: { kind: 'string', nullable: false, max: 200 },
    format: { kind: 'enum', values: SPEC_FORMATS },
    raw_document: { kind: 'string', max: maxBytes, trim: false },
    organization_id: { kind: 'string', nullable: true, max: 64 },
    external_connector_id: { kind: 'string', nullable: true, max: 64 },
    provider_slug: { kind: 'string', nullable: true, max: 63, pattern: SLUG_RE, patternText: 'must be 1-63 lowercase letters, digits or hyphens', trim: false },
  };
}

const RAW = '/data/attributes/raw_document';

async function derive(text: string, format: 'json' | 'yaml', opts: SpecWriteOptions): Promise<NormalizedSpec> {
  if (Buffer.byteLength(text, 'utf8') > opts.maxBytes) throw invalidAt(RAW, `raw_document must be at most ${opts.maxBytes} bytes`);
  try {
    return await opts.importer.importSpec(text, format, { allowPrivateEgress: opts.allowPrivateEgress, maxOperations: opts.maxOperations });
  } catch (err) {
    if (err instanceof DocumentProblem) throw invalidAt(RAW, `raw_document: ${err.message}`);
    throw err;
  }
}

const derived = (spec: NormalizedSpec) => ({
  openapi_version: spec.openapi_version,
  title: spec.title,
  version: spec.version,
  servers: JSON.stringify(spec.servers),
  security_schemes: JSON.stringify(spec.security_schemes),
  operations: JSON.stringify(spec.operations),
});

/** A new api_spec row of the caller's workspace: the document as given and what was read from it. */
export function newSpecRow(
  principal: Pick<Principal, 'organizationId' | 'workspaceId'>,
  doc: { name: string; format: 'json' | 'yaml'; text: string; connectorId: string | null; providerSlug: string | null },
  spec: NormalizedSpec,
): Insertable<ApiSpecTable> {
  return {
    id: uuidv7(),
    organization_id: principal.organizationId,
    workspace_id: principal.workspaceId,
    name: doc.name,
    format: doc.format,
    raw_document: doc.text,
    external_connector_id: doc.connectorId,
    provider_slug: doc.providerSlug,
    ...derived(spec),
  };
}

async function connectorId(db: Db, principal: Principal, value: unknown): Promise<string | null> {
  if (value === null || value === undefined) return null;
  const id = String(value).toLowerCase();
  // One text whether the connector is absent or another workspace's.
  if (!isUuid(id) || !(await connectorInWorkspace(db, principal.workspaceId, id))) {
    throw invalidAt('/data/attributes/external_connector_id', 'external_connector_id does not name an external connector of this workspace');
  }
  return id;
}

export async function createApiSpec(db: Db, principal: Principal, attrs: Record<string, unknown>, opts: SpecWriteOptions) {
  checkOrganization(principal, attrs.organization_id);
  let name = attrs.name as string | undefined;
  let format = attrs.format as 'json' | 'yaml' | undefined;
  let text = attrs.raw_document as string | undefined;
  const slug = (attrs.provider_slug as string | null | undefined) ?? null;
  if (slug !== null) {
    const provider = findProvider(slug);
    if (!provider)
      throw invalidAt(
        '/data/attributes/provider_slug',
        `provider_slug ${JSON.stringify(slug)} is not a bundled provider (GET /api/json/v1/providers lists them)`,
      );
    if (text !== undefined || format !== undefined)
      throw invalidAt(
        text !== undefined ? RAW : '/data/attributes/format',
        'Give provider_slug alone to install its document, or format and raw_document to upload one',
      );
    ({ format, text } = { format: provider.spec.format, text: provider.spec.text });
    name ??= provider.name;
  }
  if (name === undefined) throw invalidAt('/data/attributes/name', 'name is required');
  if (format === undefined) throw invalidAt('/data/attributes/format', 'format is required (json or yaml), or give provider_slug');
  if (text === undefined) throw invalidAt(RAW, 'raw_document is required, or give provider_slug');
  if (name.trim() === '') throw invalidAt('/data/attributes/name', 'name must not be empty');
  const external = await connectorId(db, principal, attrs.external_connector_id);
  const spec = await derive(text, format, opts);
  try {
    return { row: await insertApiSpec(db, newSpecRow(principal, { name, format, text, connectorId: external, providerSlug: slug }, spec)) };
  } catch (err) {
    throw fromPgError(err);
  }
}

export async function patchApiSpec(
  db: Db,
  principal: Principal,
  existing: Selectable<ApiSpecTable>,
  attrs: Record<string, unknown>,
  opts: SpecWriteOptions,
  now: Date,
) {
  checkOrganization(principal, attrs.organization_id);
  if (attrs.provider_slug !== undefined && attrs.provider_slug !== existing.provider_slug) {
    throw invalidAt('/data/attributes/provider_slug', 'provider_slug is set when the specification is created');
  }
  const patch: Updateable<ApiSpecTable> = {};
  if (attrs.name !== undefined) {
    if ((attrs.name as string).trim() === '') throw invalidAt('/data/attributes/name', 'name must not be empty');
    patch.name = attrs.name as string;
  }
  if (attrs.external_connector_id !== undefined) patch.external_connector_id = await connectorId(db, principal, attrs.external_connector_id);
  let changes: ReturnType<typeof diffOperations> | undefined;
  if (attrs.raw_document !== undefined || attrs.format !== undefined) {
    const format = (attrs.format as 'json' | 'yaml' | undefined) ?? existing.format;
    const text = (attrs.raw_document as string | undefined) ?? existing.raw_document;
    const spec = await derive(text, format, opts);
    Object.assign(patch, { format, raw_document: text, ...derived(spec) });
    changes = diffOperations(existing.operations, spec.operations);
    // Kept until the next update that alters the operations: a new name or an equal document leaves it.
    if (changes.added.length + changes.removed.length + changes.changed.length > 0)
      patch.last_changes = JSON.stringify({ changed_at: now.toISOString(), ...changes } satisfies SpecLastChanges);
  }
  try {
    const row = await updateApiSpec(db, principal.workspaceId, existing.id, patch, now);
    if (!row) throw new AppError('not_found', 'No api_spec with this id');
    return changes ? { row, meta: { changes } } : { row };
  } catch (err) {
    throw fromPgError(err);
  }
}

/**
 * DELETE a specification: 409 when it is the last one of its connector and a workflow that
 * is not deleted calls that connector by operation_ref (the operation is found in it). A
 * specification without a connector, or one of several, is used by nothing.
 */
export async function deleteApiSpec(db: Db, principal: Principal, id: string): Promise<void> {
  await db.transaction().execute(async (trx) => {
    const spec = await lockApiSpec(trx, principal.workspaceId, id);
    if (!spec) throw new AppError('not_found', 'No api_spec with this id');
    const connectorId = spec.external_connector_id;
    if (connectorId !== null && !(await otherSpecOf(trx, principal.workspaceId, connectorId, id))) {
      await refuseIfUsed(trx, principal.workspaceId, 'api_spec', { kind: 'api_spec', connectorId });
    }
    await deleteApiSpecRow(trx, principal.workspaceId, id);
  });
}
