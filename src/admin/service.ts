/**
 * Administration: tenancy, users, memberships, service accounts and widget placements.
 * Called by the admin API (and so by the CLI), by the first-start bootstrap and by tests.
 */
import { findDataModel } from '../resources/data_models/data-models.sql.ts';
import { findWorkspace } from '../resources/workspaces/workspaces.sql.ts';
import { checkWidget, WIDGET_KINDS } from '../resources/dashboard_widgets/config.ts';
import type { Db } from '../db/connect.ts';
import type { Role } from '../db/tables.ts';
import { AppError, fromPgError, invalidAt, invalidParam } from '../errors.ts';
import { isUuid, uuidv7 } from '../ids.ts';
import { readInput, type InputField, type InputSchema } from '../input.ts';
import { randomSecret, SECRET_PREFIX, sha256Hex } from '../secrets.ts';
import { isScope, SCOPES, type Scope } from '../auth/tokens.ts';
import * as q from './admin.sql.ts';

const notFound = (what: string) => new AppError('not_found', `No ${what} with this id`);

// The input rules of the admin API, in the vocabulary JSON:API documents are checked with. What readInput
// returns was checked against them: the casts of its members below restate the kind each was checked to have.
const NAME: InputField = { kind: 'string', required: true, max: 200 };
const OPTIONAL_NAME: InputField = { kind: 'string', nullable: true, max: 200 };
const ID: InputField = { kind: 'id', required: true };
const DNS_NAME = /^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/i;

const ORGANIZATION: InputSchema = { name: NAME, domain: { kind: 'string', required: true, max: 253, pattern: DNS_NAME, patternText: 'must be a DNS name' } };
const WORKSPACE: InputSchema = { organization_id: ID, name: NAME };
const USER: InputSchema = {
  email: { kind: 'string', required: true, max: 320, pattern: /^[^\s@]+@[^\s@]+$/, patternText: 'must be an email address' },
  first_name: OPTIONAL_NAME,
  last_name: OPTIONAL_NAME,
  phone_number: { kind: 'string', nullable: true, max: 40 },
  timezone: { kind: 'string', nullable: true, max: 64 },
};
const MEMBER: InputSchema = { organization_id: ID, user_id: ID, role: { kind: 'enum', required: true, values: ['owner', 'admin', 'member'] } };
const CREDENTIAL: InputSchema = { workspace_id: ID, run_as_membership_id: ID, name: NAME };
const CREDENTIAL_PATCH: InputSchema = { is_active: { kind: 'boolean' }, workspace_id: { kind: 'id' }, revoke_tokens: { kind: 'boolean' } };
const WIDGET: InputSchema = {
  workspace_id: ID,
  data_model_id: { kind: 'id' },
  data_model: { kind: 'string', max: 63 },
  dashboard: { kind: 'string', max: 100 },
  kind: { kind: 'enum', required: true, values: WIDGET_KINDS },
  title: OPTIONAL_NAME,
  config: { kind: 'object', nullable: true, maxBytes: 65_536 },
};

async function wrap<T>(p: Promise<T>): Promise<T> {
  try {
    return await p;
  } catch (err) {
    throw fromPgError(err, q.ADMIN_CONSTRAINTS);
  }
}

export function parseScopes(v: unknown): Scope[] {
  const list =
    typeof v === 'string'
      ? v
          .split(',')
          .map((s) => s.trim())
          .filter(Boolean)
      : v;
  if (!Array.isArray(list) || list.length === 0 || !list.every((s): s is Scope => typeof s === 'string' && isScope(s))) {
    throw invalidAt('/scopes', `scopes must be a non-empty list of ${SCOPES.join(', ')}`);
  }
  return [...new Set(list)];
}

export async function createOrganization(db: Db, input: { name?: unknown; domain?: unknown }) {
  const v = readInput(ORGANIZATION, input);
  return wrap(q.insertOrganization(db, { id: uuidv7(), name: v.name as string, domain: (v.domain as string).toLowerCase() }));
}

export async function createWorkspace(db: Db, input: { organization_id?: unknown; name?: unknown }) {
  const v = readInput(WORKSPACE, input);
  const orgId = v.organization_id as string;
  if (!(await q.findOrganization(db, orgId))) throw notFound('organization');
  return wrap(q.insertWorkspace(db, { id: uuidv7(), organization_id: orgId, name: v.name as string }));
}

export async function createUser(db: Db, input: { email?: unknown; first_name?: unknown; last_name?: unknown; timezone?: unknown; phone_number?: unknown }) {
  const v = readInput(USER, input);
  const email = v.email as string;
  const timezone = (v.timezone as string | null | undefined) ?? null;
  if (timezone !== null && !Intl.supportedValuesOf('timeZone').includes(timezone) && timezone !== 'UTC')
    throw invalidAt('/timezone', 'timezone must be an IANA timezone name');
  return wrap(
    q.insertUser(db, {
      id: uuidv7(),
      email,
      first_name: (v.first_name as string | null | undefined) ?? null,
      last_name: (v.last_name as string | null | undefined) ?? null,
      phone_number: (v.phone_number as string | null | undefined) ?? null,
      timezone,
      preferences: '{}',
    }),
  );
}

export async function addMember(db: Db, input: { organization_id?: unknown; user_id?: unknown; role?: unknown }) {
  const v = readInput(MEMBER, input);
  const orgId = v.organization_id as string;
  const userId = v.user_id as string;
  if (!(await q.findOrganization(db, orgId))) throw notFound('organization');
  if (!(await q.findUser(db, userId))) throw notFound('user');
  return wrap(q.insertMembership(db, { id: uuidv7(), organization_id: orgId, user_id: userId, role: v.role as Role }));
}

export async function deactivateMember(db: Db, membershipId: unknown, now: Date) {
  const row = isUuid(membershipId) ? await q.setMembershipActive(db, membershipId.toLowerCase(), false, now) : undefined;
  if (!row) throw notFound('membership');
  return row;
}

/** A widget placement of any workspace (the admin acts for every workspace); nothing else refers to one. */
export async function deleteWidget(db: Db, widgetId: unknown) {
  const row = isUuid(widgetId) ? await q.deleteWidgetById(db, widgetId.toLowerCase()) : undefined;
  if (!row) throw notFound('widget');
  return { deleted: { type: 'dashboard_widget', id: row.id } };
}

/** The account row without its secret hash: what the admin API returns. */
function publicAccount<T extends { secret_hash: string; tokens_not_before: Date | null }>(row: T): Omit<T, 'secret_hash' | 'tokens_not_before'> {
  const { secret_hash: _hash, tokens_not_before: _nbf, ...rest } = row;
  return rest;
}

export async function createCredential(db: Db, input: { workspace_id?: unknown; run_as_membership_id?: unknown; name?: unknown; scopes?: unknown }) {
  const v = readInput(CREDENTIAL, input);
  const workspaceId = v.workspace_id as string;
  const membershipId = v.run_as_membership_id as string;
  const name = v.name as string;
  const scopes = parseScopes(input.scopes);
  const workspace = await findWorkspace(db, workspaceId);
  if (!workspace) throw notFound('workspace');
  const membership = await q.findMembership(db, membershipId);
  if (!membership || membership.organization_id !== workspace.organization_id) {
    throw invalidAt('/run_as_membership_id', "run_as_membership_id must be a membership of the workspace's organization");
  }
  if (!membership.is_active) throw invalidAt('/run_as_membership_id', 'the run-as membership is inactive');
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

export async function updateCredential(
  db: Db,
  credentialId: unknown,
  input: { scopes?: unknown; is_active?: unknown; workspace_id?: unknown; revoke_tokens?: unknown },
  now: Date,
) {
  const accountId = readInput({ id: ID }, { id: credentialId }).id as string;
  const v = readInput(CREDENTIAL_PATCH, input);
  const account = await q.findServiceAccount(db, accountId);
  if (!account) throw notFound('credential');
  const patch: { scopes?: string[]; is_active?: boolean; workspace_id?: string } = {};
  if (input.scopes !== undefined) patch.scopes = parseScopes(input.scopes);
  if (v.is_active !== undefined) patch.is_active = v.is_active as boolean;
  if (v.workspace_id !== undefined) {
    const ws = await findWorkspace(db, v.workspace_id as string);
    // The run-as membership belongs to the organization, so an account stays inside it.
    if (!ws || ws.organization_id !== account.organization_id)
      throw invalidAt('/workspace_id', "workspace_id must be a workspace of the account's organization");
    patch.workspace_id = ws.id;
  }
  const narrowed = v.revoke_tokens === true || patch.is_active === false || (patch.workspace_id !== undefined && patch.workspace_id !== account.workspace_id);
  // Tokens minted before a deactivation, move or revocation stay dead even if it is undone.
  // A removed scope is refused per request instead, so the token's other scopes keep working.
  const row = await wrap(q.updateServiceAccount(db, accountId, narrowed ? { ...patch, tokens_not_before: now } : patch, now));
  if (!row) throw notFound('credential');
  return publicAccount(row);
}

export async function createWidget(
  db: Db,
  input: {
    workspace_id?: unknown;
    data_model_id?: unknown;
    data_model?: unknown;
    kind?: unknown;
    title?: unknown;
    dashboard?: unknown;
    position?: unknown;
    config?: unknown;
  },
) {
  const v = readInput(WIDGET, input);
  const workspaceId = v.workspace_id as string;
  // The model by id, or by slug as `tributary facts import` names it.
  const slug = v.data_model_id === undefined ? (v.data_model as string | undefined) : undefined;
  if (slug === undefined && v.data_model_id === undefined) throw invalidAt('/data_model_id', 'data_model_id (or data_model, a slug) is required');
  const workspace = await findWorkspace(db, workspaceId);
  if (!workspace) throw notFound('workspace');
  const model = await findDataModel(db, workspaceId, slug !== undefined ? { slug } : { id: v.data_model_id as string });
  if (!model) {
    throw slug !== undefined
      ? invalidAt('/data_model', `the workspace has no data model with the slug "${slug}"`)
      : invalidAt('/data_model_id', 'data_model_id must be a data model of the workspace');
  }
  const dataModelId = model.id;
  // The JSON:API writes' check (resources/dashboard_widgets/config.ts), with this API's pointers.
  const { kind, position, config } = checkWidget(input, undefined, (name) => `/${name}`);
  return wrap(
    q.insertWidget(db, {
      id: uuidv7(),
      organization_id: workspace.organization_id,
      workspace_id: workspaceId,
      data_model_id: dataModelId,
      dashboard: (v.dashboard as string | undefined) ?? 'home',
      kind,
      title: (v.title as string | null | undefined) ?? null,
      position: JSON.stringify(position),
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

function listLimit(v: unknown): number {
  if (v === undefined) return 100;
  if (typeof v !== 'string' || !/^\d{1,4}$/.test(v) || Number(v) < 1 || Number(v) > 1000)
    throw invalidParam('limit', 'limit must be a whole number from 1 to 1000');
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
const LISTS: Record<
  ListKind,
  { filter?: 'organization_id' | 'workspace_id'; read: (db: Db, limit: number, filter: string | undefined) => Promise<unknown[]> }
> = {
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
