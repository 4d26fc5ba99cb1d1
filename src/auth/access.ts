/**
 * What each operation needs of its caller, in one table: the token scope, and for what
 * holds or hands out secrets the run-as member's role. Every surface and service asks
 * `authorize` with a permission of this table rather than checking a scope or a role
 * itself, so a rule is read and changed in one place.
 *
 * A permission is `${type}.${action}`: a JSON:API type's `read` (its list and read by id)
 * and `write` (its POST, PATCH and actions), `delete` (its DELETE: the role its writes need), then the finer actions a service checks once
 * it knows what is asked (a connector's create, update and verify; a workflow saved with
 * steps that call out through connectors), and the other surfaces' operations.
 */
import { AppError } from '../errors.ts';
import type { Role } from '../db/tables.ts';
import type { Scope } from './tokens.ts';
import type { Principal } from './principal.ts';

export interface AccessRule {
  scope: Scope;
  /** The run-as member's role must be one of these; absent: any role. */
  roles?: readonly Role[];
  /** The 403's detail when the role is not one of `roles`. */
  detail?: string;
}

/**
 * Who may manage external connectors (they hold secrets) and hand their credentials to a
 * workflow: only an admin or owner may save a workflow with an http_request step, and its
 * runs call out only while the membership that saved the steps is still an active admin
 * or owner (saverMayCallConnectors).
 */
export const CONNECTOR_ROLES: readonly Role[] = ['admin', 'owner'];

/** Whether a workflow version's saver (as stored now) may still have its steps call out through connectors. */
export function saverMayCallConnectors(saver: { role: Role; is_active: boolean } | undefined): boolean {
  return saver !== undefined && saver.is_active && CONNECTOR_ROLES.includes(saver.role);
}

const READ: AccessRule = { scope: 'api_read' };
const WRITE: AccessRule = { scope: 'api_write' };
const connectors = (detail: string): AccessRule => ({ scope: 'api_write', roles: CONNECTOR_ROLES, detail });

/** Every permission an operation asks for. A type of the JSON:API registry without its `read` row does not start. */
export const ACCESS = {
  'organization.read': READ,
  'org_membership.read': READ,
  'user.read': READ,
  'credential.read': READ,
  'dashboard_widget.read': READ,
  'dashboard_widget.write': connectors('Only an admin or owner may place or change dashboard widgets'),
  'dashboard_widget.delete': connectors('Only an admin or owner may delete dashboard widgets'),
  'workspace.read': READ,
  'data_model.read': READ,
  'data_model.write': WRITE,
  'data_model.delete': WRITE,
  'data_model_field.read': READ,
  'data_model_field.write': WRITE,
  'data_model_field.delete': WRITE,
  'external_connector.read': READ,
  'external_connector.write': WRITE,
  'external_connector.create': connectors('Only an admin or owner may create external connectors'),
  'external_connector.update': connectors('Only an admin or owner may change external connectors'),
  'external_connector.verify': connectors('Only an admin or owner may verify external connectors'),
  'external_connector.delete': connectors('Only an admin or owner may delete external connectors'),
  'api_spec.read': READ,
  'api_spec.write': WRITE,
  'api_spec.delete': WRITE,
  'workflow.read': READ,
  'workflow.write': WRITE,
  'workflow.delete': WRITE,
  'workflow.save_http_request': connectors(
    "Only an admin or owner may save a workflow with http_request steps (they call out with an external connector's credentials)",
  ),
  // A test run writes nothing; one that calls out asks workflow.save_http_request as well (worker/test-run.ts).
  'workflow.test_run': WRITE,
  'workflow_version.read': READ,
  'workflow_state.read': READ,
  'workflow_run.read': READ,
  'workflow_run.write': WRITE,
  'provider.read': READ,
  'facts.query': READ,
  'webhooks.ingest': { scope: 'webhooks' },
} as const satisfies Record<string, AccessRule>;

export type Permission = keyof typeof ACCESS;

/** The rule of a permission named at run time (a route built for a type): unknown is a programming error. */
export function accessRule(permission: string): AccessRule {
  const rule = (ACCESS as Record<string, AccessRule>)[permission];
  if (rule === undefined) throw new Error(`no access rule for ${permission} (auth/access.ts)`);
  return rule;
}

/** A JSON:API type's `read`, `write` or `delete` permission, when its routes are built: a type without its row does not start. */
export function typePermission(type: string, action: 'read' | 'write' | 'delete'): Permission {
  const permission = `${type}.${action}`;
  accessRule(permission);
  return permission as Permission;
}

/** Whether the principal may do it, for a surface that answers a refusal in its own words. */
export function permits(principal: Principal, permission: Permission): boolean {
  const rule: AccessRule = ACCESS[permission];
  return principal.scopes.has(rule.scope) && (rule.roles === undefined || rule.roles.includes(principal.role));
}

/** 403 unless the principal may do it: the scope first, then the role. */
export function authorize(principal: Principal, permission: Permission): void {
  const rule: AccessRule = ACCESS[permission];
  if (!principal.scopes.has(rule.scope)) throw new AppError('forbidden', `This operation requires the ${rule.scope} scope`);
  if (rule.roles !== undefined && !rule.roles.includes(principal.role)) throw new AppError('forbidden', rule.detail ?? 'Your role does not allow this');
}
