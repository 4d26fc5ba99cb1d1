import type { Db } from '../db/connect.ts';

/** A service account with its run-as membership: one indexed join, no cache. */
function accountQuery(db: Db) {
  return db
    .selectFrom('service_accounts as sa')
    .innerJoin('org_memberships as m', 'm.id', 'sa.run_as_membership_id')
    .select([
      'sa.id', 'sa.organization_id', 'sa.workspace_id', 'sa.scopes', 'sa.is_active', 'sa.secret_hash', 'sa.tokens_not_before',
      'm.id as membership_id', 'm.user_id', 'm.role', 'm.is_active as membership_active', 'm.organization_id as membership_organization_id',
    ]);
}

export function loadAccountById(db: Db, id: string) {
  return accountQuery(db).where('sa.id', '=', id).executeTakeFirst();
}

export function loadAccountByClientId(db: Db, clientId: string) {
  return accountQuery(db).where('sa.client_id', '=', clientId).executeTakeFirst();
}

export type AccountRow = NonNullable<Awaited<ReturnType<typeof loadAccountById>>>;
