import { sql } from 'kysely';
import type { Principal } from '../../auth/principal.ts';
import type { AnyQuery } from '../../db/connect.ts';

/**
 * Accounts of the caller's workspace; a member sees only its own. The caller's role is read
 * in the clause itself, as stored now, not from the principal: the clause then needs only
 * what a token claims, and runs in the statement of the account re-check like every other
 * type's (that re-check refuses the request if the account no longer matches the claims).
 */
export function visibleCredentials(qb: AnyQuery, p: Principal): AnyQuery {
  return qb
    .where(sql.ref('service_accounts.workspace_id'), '=', p.workspaceId)
    .where(sql.ref('service_accounts.organization_id'), '=', p.organizationId)
    .where(
      sql<boolean>`(${sql.ref('service_accounts.id')} = ${p.credentialId} or exists (
        select 1 from service_accounts caller join org_memberships cm on cm.id = caller.run_as_membership_id
        where caller.id = ${p.credentialId} and cm.role <> 'member'))`,
    );
}
