import type { CompiledQuery } from 'kysely';
import { preferPrepared, type Db } from '../db/connect.ts';

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

// Both lookups run on every request or exchange: prepared once per connection on PostgreSQL.
async function firstPrepared<R>(db: Db, query: { compile(): CompiledQuery<R> }): Promise<R | undefined> {
  const compiled = query.compile();
  preferPrepared(compiled.sql);
  return (await db.executeQuery(compiled)).rows[0];
}

export function loadAccountById(db: Db, id: string) {
  return firstPrepared(db, accountQuery(db).where('sa.id', '=', id));
}

export function loadAccountByClientId(db: Db, clientId: string) {
  return firstPrepared(db, accountQuery(db).where('sa.client_id', '=', clientId));
}

export type AccountRow = NonNullable<Awaited<ReturnType<typeof loadAccountById>>>;
