import { sql } from 'kysely';
import type { Principal } from '../../auth/principal.ts';
import type { AnyQuery } from '../../db/connect.ts';

/** Memberships of the caller's organization, active or not (inactive ones are kept for audit). */
export function visibleMemberships(qb: AnyQuery, p: Principal): AnyQuery {
  return qb.where(sql.ref('org_memberships.organization_id'), '=', p.organizationId);
}
