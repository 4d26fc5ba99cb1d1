import { sql } from 'kysely';
import type { Principal } from '../../auth/principal.ts';
import type { AnyQuery } from '../../db/connect.ts';

/** Users are global; a caller sees those holding a membership (of any state) in its organization. */
export function visibleUsers(qb: AnyQuery, p: Principal): AnyQuery {
  return qb.where(({ exists, selectFrom }: any) =>
    exists(
      selectFrom('org_memberships as vm')
        .select(sql.lit(1).as('one'))
        .whereRef('vm.user_id', '=', 'users.id')
        .where('vm.organization_id', '=', p.organizationId),
    ),
  );
}
