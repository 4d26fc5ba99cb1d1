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

/** What a statement reads beside the account row: scalar `values` evaluated once, and `rows` joined laterally. */
export interface WithAccount {
  values?: Readonly<Record<string, RawBuilder<unknown>>>;
  rows?: SelectQueryBuilder<any, any, any> | RawBuilder<unknown>;
}

export interface AccountAndRows {
  /** Undefined when no account has this id. */
  account: AccountRow | undefined;
  values: Record<string, unknown>;
  /** The rows of `rows` in their order; none when the account is missing. */
  rows: Record<string, any>[];
}

/**
 * The one statement of the account re-check: the account with its run-as membership, and
 * whatever the request reads beside it, so that a request costs one round trip. `rows`
 * keeps its order: the lateral join is over the one account row. Give `accountId` as
 * slot('accountId') for compileOnce.
 */
export function withAccountStatement(db: Db, accountId: string, extra: WithAccount = {}) {
  let statement = (db as any).selectFrom(accountQuery(db).where('sa.id', '=', accountId).as('acct')).select(sql`row_to_json(acct)`.as('__account'));
  for (const [name, value] of Object.entries(extra.values ?? {})) statement = statement.select(value.as(`__${name}`));
  if (extra.rows === undefined) return statement;
  const rows = 'isSelectQueryBuilder' in extra.rows ? extra.rows.as('r') : sql`(${extra.rows})`.as('r');
  return statement.leftJoinLateral(rows, (join: any) => join.onTrue()).selectAll('r');
}

/** A result of withAccountStatement, apart: a row of nulls (no rows matched) is no row. */
function accountAndRows(result: Record<string, any>[], names: readonly string[], withRows: boolean): AccountAndRows {
  const first = result[0];
  if (!first) return { account: undefined, values: {}, rows: [] };
  const values: Record<string, unknown> = {};
  for (const n of names) values[n] = first[`__${n}`];
  const hidden = new Set(['__account', ...names.map((n) => `__${n}`)]);
  const rows: Record<string, any>[] = [];
  // A plain loop over the keys: entries/filter/fromEntries per row cost a list page more than its SQL's parsing.
  if (withRows) {
    for (const r of result) {
      if (r.id === null || r.id === undefined) continue;
      const row: Record<string, any> = {};
      for (const k in r) if (!hidden.has(k)) row[k] = r[k];
      rows.push(row);
    }
  }
  return { account: accountFromJson(first.__account), values, rows };
}

/**
 * The account re-check and the rest of a request's reads in one statement. Its text is the
 * reads' shape (every value is a parameter): prepared on PostgreSQL, up to the bound.
 */
export async function loadAccountWith(db: Db, accountId: string, extra: WithAccount): Promise<AccountAndRows> {
  const compiled = withAccountStatement(db, accountId, extra).compile();
  preferPrepared(compiled.sql);
  return accountAndRows((await db.executeQuery<Record<string, any>>(compiled)).rows, Object.keys(extra.values ?? {}), extra.rows !== undefined);
}

/**
 * loadAccountWith for a statement compiled once (compileOnce over withAccountStatement with
 * `rows` and no values): what runs on every request of a kind, bound with `values`.
 */
export async function loadAccountWithCompiled(
  db: Db,
  statement: CompiledOnce,
  values: Readonly<Record<string, unknown>>,
  /** Columns `__<name>` the statement selects beside the rows (one value per statement), returned in `values`. */
  names: readonly string[] = [],
): Promise<AccountAndRows> {
  return accountAndRows(await runCompiled<Record<string, any>>(db, statement, values), names, true);
}
