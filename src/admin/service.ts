/**
 * Administration: tenancy, users, memberships, service accounts and widget placements.
 * Called by the admin API (and so by the CLI), by the first-start bootstrap and by tests.
 */
import { findDataModel } from '../resources/data_models/data-models.sql.ts';
import { findWorkspace } from '../resources/workspaces/workspaces.sql.ts';
import type { Db } from '../db/connect.ts';
import type { Role } from '../db/tables.ts';
import { AppError, fromPgError } from '../errors.ts';
import { isUuid, uuidv7 } from '../ids.ts';
import { randomSecret, SECRET_PREFIX, sha256Hex } from '../secrets.ts';
import { isScope, SCOPES, type Scope } from '../auth/tokens.ts';
import * as q from './admin.sql.ts';

const invalid = (pointer: string, detail: string) => new AppError('invalid_request', detail, { source: { pointer } });
const notFound = (what: string) => new AppError('not_found', `No ${what} with this id`);

function text(v: unknown, pointer: string, max = 200): string {
  if (typeof v !== 'string' || v.trim() === '') throw invalid(pointer, `${pointer.slice(1)} is required`);
  if (v.length > max) throw invalid(pointer, `${pointer.slice(1)} must be at most ${max} characters`);
  return v.trim();
}

function optionalText(v: unknown, pointer: string, max = 200): string | null {
  return v === undefined || v === null ? null : text(v, pointer, max);
}

function id(v: unknown, pointer: string): string {
  if (!isUuid(v)) throw invalid(pointer, `${pointer.slice(1)} must be an id`);
  return v.toLowerCase();
}

async function wrap<T>(p: Promise<T>): Promise<T> {
  try {
    return await p;
  } catch (err) {
    throw fromPgError(err, q.ADMIN_CONSTRAINTS);
  }
}

export function parseScopes(v: unknown): Scope[] {
  const list = typeof v === 'string' ? v.split(',').map((s) => s.trim()).filter(Boolean) : v;
  if (!Array.isArray(list) || list.length === 0 || !list.every((s) => typeof s === 'string' && isScope(s))) {
    throw invalid('/scopes', `scopes must be a non-empty list of ${SCOPES.join(', ')}`);
  }
  return [...new Set(list as Scope[])];
}

export async function createOrganization(db: Db, input: { name?: unknown; domain?: unknown }) {
  const domain = text(input.domain, '/domain', 253).toLowerCase();
  if (!/^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/.test(domain)) throw invalid('/domain', 'domain must be a DNS name');
  return wrap(q.insertOrganization(db, { id: uuidv7(), name: text(input.name, '/name'), domain }));
}

export async function createWorkspace(db: Db, input: { organization_id?: unknown; name?: unknown }) {
  const orgId = id(input.organization_id, '/organization_id');
  if (!(await q.findOrganization(db, orgId))) throw notFound('organization');
  return wrap(q.insertWorkspace(db, { id: uuidv7(), organization_id: orgId, name: text(input.name, '/name') }));
}

export async function createUser(db: Db, input: { email?: unknown; first_name?: unknown; last_name?: unknown; timezone?: unknown; phone_number?: unknown }) {
  const email = text(input.email, '/email', 320);
  if (!/^[^\s@]+@[^\s@]+$/.test(email)) throw invalid('/email', 'email must be an email address');
  const timezone = optionalText(input.timezone, '/timezone', 64);
  if (timezone !== null && !Intl.supportedValuesOf('timeZone').includes(timezone) && timezone !== 'UTC') throw invalid('/timezone', 'timezone must be an IANA timezone name');
  return wrap(
    q.insertUser(db, {
      id: uuidv7(),
      email,
      first_name: optionalText(input.first_name, '/first_name'),
      last_name: optionalText(input.last_name, '/last_name'),
      phone_number: optionalText(input.phone_number, '/phone_number', 40),
      timezone,
      preferences: '{}',
    }),
  );
}

const ROLES: readonly Role[] = ['owner', 'admin', 'member'];

export async function addMember(db: Db, input: { organization_id?: unknown; user_id?: unknown; role?: unknown }) {
  const orgId = id(input.organization_id, '/organization_id');
  const userId = id(input.user_id, '/user_id');
  if (typeof input.role !== 'string' || !ROLES.includes(input.role as Role)) throw invalid('/role', 'role must be owner, admin or member');
  if (!(await q.findOrganization(db, orgId))) throw notFound('organization');
  if (!(await q.findUser(db, userId))) throw notFound('user');
  return wrap(q.insertMembership(db, { id: uuidv7(), organization_id: orgId, user_id: userId, role: input.role as Role }));
}

export async function deactivateMember(db: Db, membershipId: unknown) {
  const row = isUuid(membershipId) ? await q.setMembershipActive(db, membershipId.toLowerCase(), false) : undefined;
  if (!row) throw notFound('membership');
  return row;
}

/** The account row without its secret hash: what the admin API returns. */
function publicAccount<T extends { secret_hash: string; tokens_not_before: Date | null }>(row: T): Omit<T, 'secret_hash' | 'tokens_not_before'> {
  const { secret_hash: _hash, tokens_not_before: _nbf, ...rest } = row;
  return rest;
}

export async function createCredential(db: Db, input: { workspace_id?: unknown; run_as_membership_id?: unknown; name?: unknown; scopes?: unknown }) {
  const workspaceId = id(input.workspace_id, '/workspace_id');
  const membershipId = id(input.run_as_membership_id, '/run_as_membership_id');
  const name = text(input.name, '/name');
  const scopes = parseScopes(input.scopes);
  const workspace = await findWorkspace(db, workspaceId);
  if (!workspace) throw notFound('workspace');
  const membership = await q.findMembership(db, membershipId);
  if (!membership || membership.organization_id !== workspace.organization_id) {
    throw invalid('/run_as_membership_id', "run_as_membership_id must be a membership of the workspace's organization");
  }
  if (!membership.is_active) throw invalid('/run_as_membership_id', 'the run-as membership is inactive');
  const clientSecret = randomSecret(SECRET_PREFIX.clientSecret);
  const row = await wrap(
    q.insertServiceAccount(db, {
      id: uuidv7(),
      organization_id: workspace.organization_id,
      workspace_id: workspaceId,
      run_as_membership_id: membershipId,
      name,
      client_id: randomSecret('tbci_').slice(0, 37),
      secret_hash: sha256Hex(clientSecret),
      scopes,
    }),
  );
  return { ...publicAccount(row), client_secret: clientSecret };
}

export async function updateCredential(db: Db, credentialId: unknown, input: { scopes?: unknown; is_active?: unknown; workspace_id?: unknown; revoke_tokens?: unknown }, now: Date) {
  const accountId = id(credentialId, '/id');
  const account = await q.findServiceAccount(db, accountId);
  if (!account) throw notFound('credential');
  const patch: { scopes?: string[]; is_active?: boolean; workspace_id?: string } = {};
  if (input.scopes !== undefined) patch.scopes = parseScopes(input.scopes);
  if (input.is_active !== undefined) {
    if (typeof input.is_active !== 'boolean') throw invalid('/is_active', 'is_active must be true or false');
    patch.is_active = input.is_active;
  }
  if (input.workspace_id !== undefined) {
    const ws = await findWorkspace(db, id(input.workspace_id, '/workspace_id'));
    // The run-as membership belongs to the organization, so an account stays inside it.
    if (!ws || ws.organization_id !== account.organization_id) throw invalid('/workspace_id', "workspace_id must be a workspace of the account's organization");
    patch.workspace_id = ws.id;
  }
  if (input.revoke_tokens !== undefined && typeof input.revoke_tokens !== 'boolean') throw invalid('/revoke_tokens', 'revoke_tokens must be true or false');
  const narrowed =
    input.revoke_tokens === true ||
    patch.is_active === false ||
    (patch.workspace_id !== undefined && patch.workspace_id !== account.workspace_id);
  // Tokens minted before a deactivation, move or revocation stay dead even if it is undone.
  // A removed scope is refused per request instead, so the token's other scopes keep working.
  const row = await wrap(q.updateServiceAccount(db, accountId, narrowed ? { ...patch, tokens_not_before: now } : patch));
  if (!row) throw notFound('credential');
  return publicAccount(row);
}

function position(v: unknown): { x: number; y: number; w: number; h: number } {
  if (v === undefined || v === null) return { x: 0, y: 0, w: 4, h: 3 };
  const p = v as Record<string, unknown>;
  if (typeof v !== 'object' || Array.isArray(v) || !['x', 'y', 'w', 'h'].every((k) => Number.isInteger(p[k]) && (p[k] as number) >= 0 && (p[k] as number) <= 10_000)) {
    throw invalid('/position', 'position must be an object {x, y, w, h} of whole numbers');
  }
  return { x: p.x as number, y: p.y as number, w: p.w as number, h: p.h as number };
}

export async function createWidget(db: Db, input: { workspace_id?: unknown; data_model_id?: unknown; data_model?: unknown; kind?: unknown; title?: unknown; dashboard?: unknown; position?: unknown; config?: unknown }) {
  const workspaceId = id(input.workspace_id, '/workspace_id');
  const workspace = await findWorkspace(db, workspaceId);
  if (!workspace) throw notFound('workspace');
  // The model by id, or by slug as `tributary facts import` names it.
  const bySlug = input.data_model_id === undefined && input.data_model !== undefined;
  const slug = bySlug ? text(input.data_model, '/data_model', 63) : undefined;
  const model = await findDataModel(db, workspaceId, slug !== undefined ? { slug } : { id: id(input.data_model_id, '/data_model_id') });
  if (!model) {
    throw bySlug
      ? invalid('/data_model', `the workspace has no data model with the slug "${slug}"`)
      : invalid('/data_model_id', 'data_model_id must be a data model of the workspace');
  }
  const dataModelId = model.id;
  const config = input.config ?? {};
  if (typeof config !== 'object' || config === null || Array.isArray(config)) throw invalid('/config', 'config must be an object');
  return wrap(
    q.insertWidget(db, {
      id: uuidv7(),
      organization_id: workspace.organization_id,
      workspace_id: workspaceId,
      data_model_id: dataModelId,
      dashboard: input.dashboard === undefined ? 'home' : text(input.dashboard, '/dashboard', 100),
      kind: text(input.kind, '/kind', 100),
      title: optionalText(input.title, '/title'),
      position: JSON.stringify(position(input.position)),
      config: JSON.stringify(config),
    }),
  );
}

/** What a list request asks for: `limit` rows (1-1000, default 100) and optional id filters. */
export interface ListQuery {
  limit?: unknown;
  [filter: string]: unknown;
}

export interface ListResult<T> {
  data: T[];
  has_more: boolean;
}

const invalidParam = (parameter: string, detail: string) => new AppError('invalid_query', detail, { source: { parameter } });

function listLimit(v: unknown): number {
  if (v === undefined) return 100;
  if (typeof v !== 'string' || !/^\d{1,4}$/.test(v) || Number(v) < 1 || Number(v) > 1000) throw invalidParam('limit', 'limit must be a whole number from 1 to 1000');
  return Number(v);
}

function idParam(v: unknown, parameter: string): string | undefined {
  if (v === undefined) return undefined;
  if (!isUuid(v)) throw invalidParam(parameter, `${parameter} must be an id`);
  return v.toLowerCase();
}

/** One more row than asked tells whether there are more. */
async function page<T>(limit: number, read: (limit: number) => Promise<T[]>): Promise<ListResult<T>> {
  const rows = await read(limit + 1);
  return { data: rows.slice(0, limit), has_more: rows.length > limit };
}

export type ListKind = 'organizations' | 'workspaces' | 'users' | 'memberships' | 'credentials' | 'widgets' | 'data_models';

/** Each list and the id filter it takes, if any. */
const LISTS: Record<ListKind, { filter?: 'organization_id' | 'workspace_id'; read: (db: Db, limit: number, filter: string | undefined) => Promise<unknown[]> }> = {
  organizations: { read: (db, limit) => q.listOrganizations(db, { limit }) },
  workspaces: { filter: 'organization_id', read: (db, limit, organizationId) => q.listWorkspaces(db, { limit, organizationId }) },
  users: { read: (db, limit) => q.listUsers(db, { limit }) },
  memberships: { filter: 'organization_id', read: (db, limit, organizationId) => q.listMemberships(db, { limit, organizationId }) },
  credentials: { filter: 'workspace_id', read: (db, limit, workspaceId) => q.listServiceAccounts(db, { limit, workspaceId }) },
  widgets: { filter: 'workspace_id', read: (db, limit, workspaceId) => q.listInWorkspace(db, 'dashboard_widgets', { limit, workspaceId }) },
  data_models: { filter: 'workspace_id', read: (db, limit, workspaceId) => q.listInWorkspace(db, 'data_models', { limit, workspaceId }) },
};

export async function list(db: Db, kind: ListKind, query: ListQuery): Promise<ListResult<unknown>> {
  const spec = LISTS[kind];
  for (const k of Object.keys(query)) {
    if (k !== 'limit' && k !== spec.filter) throw invalidParam(k, `unknown parameter ${k}; ${kind} takes limit${spec.filter ? ` and ${spec.filter}` : ''}`);
  }
  const limit = listLimit(query.limit);
  const filter = spec.filter ? idParam(query[spec.filter], spec.filter) : undefined;
  return page(limit, (n) => spec.read(db, n, filter));
}

/**
 * A service account by client id with what it acts as: its workspace, organization,
 * run-as membership (and that member's email) and scopes. Never its secret or hash.
 */
export async function whoami(db: Db, clientId: unknown) {
  if (typeof clientId !== 'string' || clientId === '' || clientId.length > 100) throw invalidParam('client_id', 'client_id is required');
  const account = await q.findServiceAccountByClientId(db, clientId);
  if (!account) throw new AppError('not_found', 'No service account with this client_id');
  const [workspace, organization, membership] = await Promise.all([
    findWorkspace(db, account.workspace_id),
    q.findOrganization(db, account.organization_id),
    q.findMembership(db, account.run_as_membership_id),
  ]);
  const user = membership ? await q.findUser(db, membership.user_id) : undefined;
  return {
    credential: account,
    workspace: workspace ?? null,
    organization: organization ?? null,
    run_as_membership: membership ? { ...membership, user_email: user?.email ?? null } : null,
    scopes: account.scopes,
  };
}
