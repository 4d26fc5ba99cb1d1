import { sql, type RawBuilder, type SelectQueryBuilder } from 'kysely';
import { preferPrepared, type Db } from '../db/connect.ts';
import { compileOnce, runCompiled, slot, type CompiledOnce } from '../db/compiled.ts';

/** A service account with its run-as membership: one indexed join, no cache. */
function accountQuery(db: Db) {
  return db
    .selectFrom('service_accounts as sa')
    .innerJoin('org_memberships as m', 'm.id', 'sa.run_as_membership_id')
    .select([
      'sa.id',
      'sa.organization_id',
      'sa.workspace_id',
      'sa.scopes',
      'sa.is_active',
      'sa.secret_hash',
      'sa.tokens_not_before',
      'm.id as membership_id',
      'm.user_id',
      'm.role',
      'm.is_active as membership_active',
      'm.organization_id as membership_organization_id',
    ]);
}

export type AccountRow = NonNullable<Awaited<ReturnType<ReturnType<typeof accountQuery>['executeTakeFirst']>>>;

// Both lookups run on every request or exchange: compiled once, prepared once per
// connection on PostgreSQL.
let byId: CompiledOnce | undefined;
let byClientId: CompiledOnce | undefined;

export async function loadAccountById(db: Db, id: string): Promise<AccountRow | undefined> {
  byId ??= compileOnce(accountQuery(db).where('sa.id', '=', slot('id')));
  return (await runCompiled<AccountRow>(db, byId, { id }))[0];
}

export async function loadAccountByClientId(db: Db, clientId: string): Promise<AccountRow | undefined> {
  byClientId ??= compileOnce(accountQuery(db).where('sa.client_id', '=', slot('clientId')));
  return (await runCompiled<AccountRow>(db, byClientId, { clientId }))[0];
}

/** The account's row as row_to_json renders it, back to the row type (timestamps come as text). */
function accountFromJson(json: Record<string, any>): AccountRow {
  return { ...json, tokens_not_before: json.tokens_not_before === null ? null : new Date(json.tokens_not_before) } as AccountRow;
}

/** The account lookup with `rowsQuery` joined laterally: one row per row of it, or one with nulls. */
function withAccount(db: Db, accountId: string, rowsQuery: SelectQueryBuilder<any, any, any>) {
  return (db as any)
    .selectFrom(accountQuery(db).where('sa.id', '=', accountId).as('acct'))
    .leftJoinLateral(rowsQuery.as('r'), (join: any) => join.onTrue())
    .select(sql`row_to_json(acct)`.as('__account'))
    .selectAll('r');
}

/**
 * The account re-check and a page of rows in one statement (a list): `rowsQuery` is
 * already narrowed to what the token's claims may see, ordered and limited; the lateral
 * join over the one account row keeps its order. Its text is the list's shape (filters,
 * sort, page kind), prepared on PostgreSQL up to a bounded number of shapes.
 */
export async function loadAccountWithRows(
  db: Db,
  accountId: string,
  rowsQuery: SelectQueryBuilder<any, any, any>,
): Promise<{ account: AccountRow | undefined; rows: Record<string, any>[] }> {
  const compiled = withAccount(db, accountId, rowsQuery).compile();
  preferPrepared(compiled.sql);
  const result = (await db.executeQuery<Record<string, any>>(compiled)).rows;
  const first = result[0];
  if (!first) return { account: undefined, rows: [] };
  const rows = result.filter((r) => r.id !== null && r.id !== undefined).map(({ __account: _a, ...row }) => row);
  return { account: accountFromJson(first.__account), rows };
}

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
  const compiled = withAccount(db, accountId, rowQuery).compile();
  preferPrepared(compiled.sql);
  return firstWithAccount((await db.executeQuery<Record<string, any>>(compiled)).rows[0]);
}

/**
 * loadAccountWithRow for a statement compiled once with slots (compileOnce over
 * withAccountStatement): the read by id of one resource type.
 */
export async function loadAccountWithCompiledRow(db: Db, statement: CompiledOnce, values: Readonly<Record<string, unknown>>) {
  return firstWithAccount((await runCompiled<Record<string, any>>(db, statement, values))[0]);
}

/** The statement of loadAccountWithRow, for compileOnce: the account id is the slot `accountId`. */
export function withAccountStatement(db: Db, rowQuery: SelectQueryBuilder<any, any, any>) {
  return withAccount(db, slot('accountId'), rowQuery);
}

function firstWithAccount(first: Record<string, any> | undefined): { account: AccountRow | undefined; row: Record<string, any> | undefined } {
  if (!first) return { account: undefined, row: undefined };
  const { __account: json, ...row } = first;
  return { account: accountFromJson(json), row: row.id === null || row.id === undefined ? undefined : row };
}

/**
 * The account re-check and the rest of a request's reads in one statement: `values` are
 * scalar expressions (evaluated once), `rows` a statement whose rows are joined laterally
 * to the one account row, keeping their order. No account row: account undefined.
 */
export async function loadAccountWith(
  db: Db,
  accountId: string,
  values: Readonly<Record<string, RawBuilder<unknown>>>,
  rows?: RawBuilder<unknown>,
): Promise<{ account: AccountRow | undefined; values: Record<string, unknown>; rows: Record<string, any>[] }> {
  const names = Object.keys(values);
  const columns = names.map((n) => sql`${values[n]!} as ${sql.id(`__${n}`)}`);
  const selected = columns.length > 0 ? sql`row_to_json(acct) as __account, ${sql.join(columns)}` : sql`row_to_json(acct) as __account`;
  const acct = accountQuery(db).where('sa.id', '=', accountId);
  const statement = rows
    ? sql<Record<string, any>>`select ${selected}, r.* from (${acct}) as acct left join lateral (${rows}) as r on true`
    : sql<Record<string, any>>`select ${selected} from (${acct}) as acct`;
  // Its text is the query's shape (every value is a parameter): prepared, up to the bound.
  const compiled = statement.compile(db);
  preferPrepared(compiled.sql);
  const result = (await db.executeQuery(compiled)).rows;
  const first = result[0];
  if (!first) return { account: undefined, values: {}, rows: [] };
  const out: Record<string, unknown> = {};
  for (const n of names) out[n] = first[`__${n}`];
  const hidden = new Set(['__account', ...names.map((n) => `__${n}`)]);
  const page = rows
    ? result.filter((r) => r.id !== null && r.id !== undefined).map((r) => Object.fromEntries(Object.entries(r).filter(([k]) => !hidden.has(k))))
    : [];
  return { account: accountFromJson(first.__account), values: out, rows: page };
}
