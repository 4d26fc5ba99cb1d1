/**
 * External connectors: admins and owners create and change them (they hold secrets);
 * members read them. The secret is sealed before it is stored and never returned; a
 * config.base_url must not point at a private address unless ALLOW_PRIVATE_EGRESS=true.
 */
import type { Principal } from '../../auth/principal.ts';
import { authorize } from '../../auth/access.ts';
import type { Db } from '../../db/connect.ts';
import type { ExternalConnectorTable } from '../../db/tables.ts';
import { AppError, fromPgError, invalidAt } from '../../errors.ts';
import { baseUrlProblem } from '../../egress.ts';
import { accountProblem } from '../../connectors/snowflake-sql.ts';
import { uuidv7 } from '../../ids.ts';
import { SLUG_RE, type InputSchema } from '../../input.ts';
import { isObject } from '../../json.ts';
import { openSecret, sealSecret } from '../../secret-box.ts';
import { headerNameProblem, secretProblem } from '../../connectors/inbound-rules.ts';
import type { Selectable, Updateable } from 'kysely';
import { checkOrganization } from '../data_models/service.ts';
import { AUTH_TYPES, CONNECTOR_TYPES, DIRECTIONS } from './resource.ts';
import { deleteConnectorRow, insertConnector, lockConnector, updateConnector } from './external-connectors.sql.ts';
import { refuseIfUsed } from '../workflows/usage.ts';
import { insertApiSpec } from '../api_specs/api-specs.sql.ts';
import { importSpec } from '../../openapi/import.ts';
import { newSpecRow } from '../api_specs/service.ts';
import { findProvider } from '../../providers/catalog.ts';
import { isSignatureScheme, SIGNATURE_SCHEMES } from '../../connectors/signature-schemes.ts';
import type { Quotas } from '../../config.ts';
import { checkConnectorCreate, countedWrite } from '../../quotas/quotas.ts';

/** Checked by readAttributes before a write sees attrs: the casts of its members in the writes below restate the kind each was checked to have. */
export const connectorInput: InputSchema = {
  name: { kind: 'string', required: true, max: 200 },
  // Required unless a bundled provider_slug supplies it.
  auth_type: { kind: 'enum', values: AUTH_TYPES },
  type: { kind: 'enum', nullable: true, values: CONNECTOR_TYPES },
  direction: { kind: 'enum', nullable: true, values: DIRECTIONS },
  config: { kind: 'object', nullable: true, maxBytes: 16_384 },
  description: { kind: 'string', nullable: true, max: 4000 },
  provider_slug: { kind: 'string', nullable: true, max: 63, pattern: SLUG_RE, patternText: 'must be 1-63 lowercase letters, digits or hyphens', trim: false },
  organization_id: { kind: 'string', nullable: true, max: 64 },
  // Write-only: an API key, a bearer token, a whsec_ signing secret. Null removes it.
  secret: { kind: 'string', nullable: true, max: 4096, trim: false },
};

/** What connector writes need besides the database. */
export interface ConnectorWriteOptions {
  /** The installation's connector key (AES-256-GCM). */
  key: Buffer;
  allowPrivateEgress: boolean;
}

function checkConfig(config: unknown, type: string | null | undefined, opts: ConnectorWriteOptions): string | null {
  if (config === null || config === undefined) return null;
  const c = config as Record<string, unknown>;
  // The SDK makes a URL of the account: refused here as that URL would be.
  if (type === 'snowflake' && c.account !== undefined) {
    const problem = accountProblem(c.account);
    if (problem) throw invalidAt('/data/attributes/config/account', `config.account ${problem}`);
  }
  // Every URL the service may call for this connector: the API, the token endpoint, an S3 endpoint, a Snowflake access URL.
  for (const name of ['base_url', 'token_url', 'endpoint', 'access_url'] as const) {
    const v = c[name];
    if (v === undefined || v === null) continue;
    if (typeof v !== 'string') throw invalidAt(`/data/attributes/config/${name}`, `config.${name} must be a string`);
    const problem = baseUrlProblem(v, opts.allowPrivateEgress);
    if (problem) throw invalidAt(`/data/attributes/config/${name}`, `config.${name} ${problem}`);
  }
  if (c.health_operation !== undefined && c.health_operation !== null && (typeof c.health_operation !== 'string' || c.health_operation === '')) {
    throw invalidAt('/data/attributes/config/health_operation', 'config.health_operation must be the operation_ref of an operation of the attached api_spec');
  }
  if (c.rate_limit !== undefined && c.rate_limit !== null) {
    const r = c.rate_limit;
    const at = '/data/attributes/config/rate_limit';
    if (!isObject(r)) throw invalidAt(at, 'config.rate_limit must be an object {requests, per_seconds}');
    const wholeUpTo = (n: unknown, max: number) => typeof n === 'number' && Number.isInteger(n) && n >= 1 && n <= max;
    if (!wholeUpTo(r.requests, 1_000_000)) throw invalidAt(`${at}/requests`, 'config.rate_limit.requests must be a whole number from 1 to 1000000');
    if (!wholeUpTo(r.per_seconds, 86_400))
      throw invalidAt(`${at}/per_seconds`, 'config.rate_limit.per_seconds must be a whole number of seconds from 1 to 86400');
  }
  return JSON.stringify(config);
}

/** config.signature_scheme: one of the schemes, and only on an hmac connector (no other mode signs). */
function checkScheme(config: unknown, authType: string | undefined): void {
  if (!isObject(config) || config.signature_scheme === undefined || config.signature_scheme === null) return;
  const at = '/data/attributes/config/signature_scheme';
  if (!isSignatureScheme(config.signature_scheme)) throw invalidAt(at, `config.signature_scheme must be one of ${SIGNATURE_SCHEMES.join(', ')}`);
  if (authType !== 'hmac') throw invalidAt(at, 'config.signature_scheme applies to an hmac connector only');
}

/**
 * The inbound rules (connectors/inbound-rules.ts) on what the connector will hold: its
 * config.header_name, and its secret (the one given, or with `stored` the one it keeps,
 * when a change of auth_type, direction or scheme makes another rule apply to it).
 */
function checkInbound(authType: string | undefined, direction: unknown, config: unknown, secret: unknown, stored = false): void {
  const inbound = direction === 'inbound';
  const c = isObject(config) ? config : undefined;
  if (c?.header_name !== undefined) {
    const problem = headerNameProblem(c.header_name, inbound);
    if (problem) throw invalidAt('/data/attributes/config/header_name', problem);
  }
  if (typeof secret !== 'string' || secret === '') return;
  const problem = secretProblem(authType, inbound, c?.signature_scheme, secret);
  if (problem) throw invalidAt('/data/attributes/secret', stored ? `${problem}; the stored secret does not: send a new secret with this change` : problem);
}

const sealed = (opts: ConnectorWriteOptions, secret: unknown) =>
  secret === null || secret === undefined || secret === '' ? null : sealSecret(opts.key, secret as string);

/**
 * Creates a connector. With the slug of a bundled provider, the provider's settings fill
 * what the input leaves out (its config under the given one) and the provider's
 * specification is installed as an api_spec attached to the connector, in one transaction.
 * Any other slug is only a tag.
 */
/** `quotas`: the workspace's connectors are counted first (QUOTA_CONNECTORS). */
export async function createConnector(db: Db, principal: Principal, attrs: Record<string, unknown>, opts: ConnectorWriteOptions, quotas?: Quotas) {
  authorize(principal, 'external_connector.create');
  checkOrganization(principal, attrs.organization_id);
  const slug = (attrs.provider_slug as string | null | undefined) ?? null;
  const provider = slug === null ? undefined : findProvider(slug);
  const given = attrs.config === undefined || attrs.config === null ? undefined : (attrs.config as Record<string, unknown>);
  const config = provider ? { ...provider.connector.config, ...given } : attrs.config;
  const authType = (attrs.auth_type as ExternalConnectorTable['auth_type'] | undefined) ?? provider?.connector.auth_type;
  if (authType === undefined) throw invalidAt('/data/attributes/auth_type', 'auth_type is required');
  checkScheme(config, authType);
  const direction = (attrs.direction as ExternalConnectorTable['direction'] | undefined) ?? provider?.connector.direction ?? null;
  checkInbound(authType, direction, config, attrs.secret);
  const type = (attrs.type as ExternalConnectorTable['type'] | undefined) ?? provider?.connector.type ?? null;
  const row = {
    id: uuidv7(),
    organization_id: principal.organizationId,
    workspace_id: principal.workspaceId,
    name: attrs.name as string,
    auth_type: authType,
    type,
    direction,
    config: checkConfig(config, type, opts),
    description: (attrs.description as string | null | undefined) ?? provider?.description ?? null,
    provider_slug: slug,
    secret_ciphertext: sealed(opts, attrs.secret),
  };
  // The document is read before the transaction: it is work for the CPU, not the database.
  const spec = provider ? await importSpec(provider.spec.text, provider.spec.format, { allowPrivateEgress: opts.allowPrivateEgress }) : undefined;
  try {
    const check = async (trx: Db) => {
      if (quotas) await checkConnectorCreate(trx, quotas, principal.workspaceId);
    };
    return await countedWrite(db, check, async (trx) => {
      if (!provider || !spec) return insertConnector(trx, row);
      const connector = await insertConnector(trx, row);
      const doc = { name: provider.name, format: provider.spec.format, text: provider.spec.text, connectorId: connector.id, providerSlug: provider.slug };
      await insertApiSpec(trx, newSpecRow(principal, doc, spec));
      return connector;
    });
  } catch (err) {
    throw fromPgError(err);
  }
}

export async function patchConnector(
  db: Db,
  principal: Principal,
  existing: Selectable<ExternalConnectorTable>,
  attrs: Record<string, unknown>,
  opts: ConnectorWriteOptions,
  now: Date,
) {
  authorize(principal, 'external_connector.update');
  checkOrganization(principal, attrs.organization_id);
  const patch: Updateable<ExternalConnectorTable> = {};
  for (const k of ['name', 'auth_type', 'type', 'direction', 'description', 'provider_slug'] as const) {
    // connectorInput checked each against its column: strings, and the enums' members.
    if (attrs[k] !== undefined) (patch as Record<string, unknown>)[k] = attrs[k];
  }
  const type = attrs.type !== undefined ? (attrs.type as string | null) : existing.type;
  if (attrs.config !== undefined) patch.config = checkConfig(attrs.config, type, opts);
  // A connector that becomes a snowflake one keeps its config: that config is checked as one.
  else if (attrs.type !== undefined) checkConfig(existing.config, type, opts);
  const authType = (attrs.auth_type as string | undefined) ?? existing.auth_type;
  const config = attrs.config !== undefined ? attrs.config : existing.config;
  checkScheme(config, authType);
  const direction = attrs.direction !== undefined ? attrs.direction : existing.direction;
  if (attrs.secret !== undefined) {
    checkInbound(authType, direction, config, attrs.secret);
    patch.secret_ciphertext = sealed(opts, attrs.secret);
  } else if (attrs.auth_type !== undefined || attrs.direction !== undefined || attrs.config !== undefined) {
    // The same rules as at create: a scheme, mode or direction change re-checks the secret it keeps.
    let kept: string | null;
    try {
      kept = existing.secret_ciphertext === null ? null : openSecret(opts.key, existing.secret_ciphertext);
    } catch {
      throw invalidAt('/data/attributes/secret', "The stored secret cannot be opened with this installation's key: send a new secret with this change");
    }
    checkInbound(authType, direction, config, kept, true);
  }
  try {
    const row = await updateConnector(db, principal.workspaceId, existing.id, patch, now);
    if (!row) throw new AppError('not_found', 'No external_connector with this id');
    return row;
  } catch (err) {
    throw fromPgError(err);
  }
}

/**
 * DELETE a connector: 409 while a workflow that is not deleted uses it (an http_request step
 * of any saved version, or a trigger's inbound connector). Its API specifications stay,
 * detached (external_connector_id null). The row is locked first: a save naming it either
 * committed before (and is found) or waits and then finds no connector.
 */
export async function deleteConnector(db: Db, principal: Principal, id: string): Promise<void> {
  authorize(principal, 'external_connector.delete');
  await db.transaction().execute(async (trx) => {
    if (!(await lockConnector(trx, principal.workspaceId, id))) throw new AppError('not_found', 'No external_connector with this id');
    await refuseIfUsed(trx, principal.workspaceId, 'external_connector', { kind: 'connector', id });
    await deleteConnectorRow(trx, principal.workspaceId, id);
  });
}
