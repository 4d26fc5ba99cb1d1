import { sql } from 'kysely';
import type { Principal } from '../../auth/principal.ts';
import type { AnyQuery, Db } from '../../db/connect.ts';

/** Every workspace of the caller's organization, so its ids can be found without the admin API. */
export function visibleWorkspaces(qb: AnyQuery, p: Principal): AnyQuery {
  return qb.where(sql.ref('workspaces.organization_id'), '=', p.organizationId);
}

export function findWorkspace(db: Db, id: string) {
  return db.selectFrom('workspaces').selectAll().where('id', '=', id).executeTakeFirst();
}
