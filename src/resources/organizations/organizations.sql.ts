import { sql } from 'kysely';
import type { Principal } from '../../auth/principal.ts';
import type { AnyQuery } from '../../db/connect.ts';

/** A caller sees its own organization only. */
export function visibleOrganizations(qb: AnyQuery, p: Principal): AnyQuery {
  return qb.where(sql.ref('organizations.id'), '=', p.organizationId);
}
