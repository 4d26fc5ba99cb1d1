import { sql, type CompiledQuery, type SelectQueryBuilder } from 'kysely';
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

/**
 * The account re-check and one row of a resource, in one statement: `rowQuery` (a select
 * over the resource's table, already narrowed to one id and to what the token's claims may
 * see) is joined laterally to the account, so a read by id costs one round trip, not two.
 * Prepared on PostgreSQL: one fixed text per resource type, with named columns only.
 */
export async function loadAccountWithRow(
  db: Db,
  accountId: string,
  rowQuery: SelectQueryBuilder<any, any, any>,
): Promise<{ account: AccountRow | undefined; row: Record<string, any> | undefined }> {
  const first: Record<string, any> | undefined = await firstPrepared(
    db,
    (db as any)
      .selectFrom(accountQuery(db).where('sa.id', '=', accountId).as('acct'))
      .leftJoinLateral(rowQuery.as('r'), (join: any) => join.onTrue())
      .select(sql`row_to_json(acct)`.as('__account'))
      .selectAll('r'),
  );
  if (!first) return { account: undefined, row: undefined };
  const { __account: json, ...row } = first;
  // row_to_json renders timestamps as text; the account row type carries a Date.
  const account = { ...json, tokens_not_before: json.tokens_not_before === null ? null : new Date(json.tokens_not_before) } as AccountRow;
  return { account, row: row.id === null || row.id === undefined ? undefined : row };
}
