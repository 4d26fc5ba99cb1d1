import { sql } from 'kysely';
import type { Principal } from '../../auth/principal.ts';
import type { AnyQuery } from '../../db/connect.ts';

/** Accounts of the caller's workspace; a member sees only its own. */
export function visibleCredentials(qb: AnyQuery, p: Principal): AnyQuery {
  const scoped = qb
    .where(sql.ref('service_accounts.workspace_id'), '=', p.workspaceId)
    .where(sql.ref('service_accounts.organization_id'), '=', p.organizationId);
  return p.role === 'member' ? scoped.where(sql.ref('service_accounts.id'), '=', p.credentialId) : scoped;
}
