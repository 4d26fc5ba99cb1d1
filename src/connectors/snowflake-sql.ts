/**
 * The snowflake driver's rules, without the SDK (snowflake.ts loads it when a statement
 * runs): settings, statement building, the literal-statement rule, the error mapping.
 * Settings: config.account (the account identifier), config.username, optional warehouse,
 * database, schema, role, and config.access_url for a private endpoint (checked by the
 * egress rules); the secret is the password.
 *
 * "Bound parameters only": a step's statement text is a literal of the workflow, checked
 * at save (see statementIsLiteral); values reach it only as binds.
 */
import jsonata from 'jsonata';
import { isIP } from 'node:net';
import { baseUrlProblem } from '../egress.ts';
import { isObject } from '../json.ts';
import type { ConnectorRecord } from './auth.ts';
import { ConnectorConfigError, ProviderUnavailable, RequestProblem } from './errors.ts';

export const MAX_STATEMENT_CHARS = 100_000;
export const MAX_BINDS = 1000;
/** Rows a statement's result may bring back into a step's output. */
export const MAX_RESULT_ROWS = 10_000;

const ACCOUNT = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,254}$/;
const str = (v: unknown) => (typeof v === 'string' && v !== '' ? v : undefined);

/**
 * Why config.account cannot name a Snowflake account, or undefined. The SDK builds its host
 * from the account, so the rule refuses what would make that host anything but a name under
 * Snowflake's domain: a path, port, user or slash (kept out by the pattern) and an address in
 * any spelling the URL parser reads as one (`10.0.0.1`, `0x7f.1`, `2130706433`).
 */
export function accountProblem(value: unknown): string | undefined {
  const account = str(value);
  if (!account || !ACCOUNT.test(account)) return 'must be the account identifier: letters, digits, _ . - (no scheme, path, port or @)';
  let host: string | undefined;
  try {
    host = new URL(`http://${account}/`).hostname;
  } catch {
    host = undefined;
  }
  if (isIP(account) !== 0 || (host !== undefined && isIP(host) !== 0)) return 'must be the account identifier, not an IP address';
  return undefined;
}

export interface SnowflakeSettings {
  account: string;
  username: string;
  password: string;
  warehouse?: string;
  database?: string;
  schema?: string;
  role?: string;
  accessUrl?: string;
}

export function snowflakeSettings(c: ConnectorRecord, allowPrivateEgress: boolean): SnowflakeSettings {
  const cfg = c.config ?? {};
  const account = str(cfg.account);
  const username = str(cfg.username);
  const problem = accountProblem(account);
  if (!account || problem) throw new ConnectorConfigError(`A snowflake connector needs config.account: it ${problem}`);
  if (!username) throw new ConnectorConfigError('A snowflake connector needs config.username');
  if (c.secret === undefined) throw new ConnectorConfigError('A snowflake connector needs the password as its secret');
  const accessUrl = str(cfg.access_url);
  if (accessUrl !== undefined) {
    const urlProblem = baseUrlProblem(accessUrl, allowPrivateEgress);
    if (urlProblem) throw new ConnectorConfigError(`config.access_url ${urlProblem}`);
  }
  const out: SnowflakeSettings = { account, username, password: c.secret };
  for (const k of ['warehouse', 'database', 'schema', 'role'] as const) {
    const v = str(cfg[k]);
    if (v !== undefined) out[k] = v;
  }
  if (accessUrl !== undefined) out.accessUrl = accessUrl;
  return out;
}

export type Bind = string | number | boolean | null;

/**
 * A statement from a step's body `{statement, bindings?}`: bindings an array of scalars
 * (for `?` or `:1`, `:2` placeholders) or the SQL API's `{"1": {"type", "value"}}` object.
 */
export function buildStatement(body: unknown): { sqlText: string; binds: Bind[] } {
  if (!isObject(body)) throw new RequestProblem('A snowflake statement is an object {statement, bindings?}');
  const sqlText = body.statement;
  if (typeof sqlText !== 'string' || sqlText.trim() === '') throw new RequestProblem('statement must be SQL text');
  if (sqlText.length > MAX_STATEMENT_CHARS) throw new RequestProblem(`statement must be at most ${MAX_STATEMENT_CHARS} characters`);
  const raw = body.bindings ?? [];
  let binds: unknown[];
  if (Array.isArray(raw)) binds = raw;
  else if (isObject(raw)) {
    const keys = Object.keys(raw).map(Number);
    if (keys.some((k) => !Number.isInteger(k) || k < 1)) throw new RequestProblem('bindings as an object are keyed "1", "2", ...');
    binds = [];
    for (const k of keys.sort((a, b) => a - b)) {
      const b = raw[String(k)];
      binds[k - 1] = isObject(b) ? b.value : b;
    }
  } else throw new RequestProblem('bindings must be an array or an object keyed "1", "2", ...');
  if (binds.length > MAX_BINDS) throw new RequestProblem(`at most ${MAX_BINDS} bindings`);
  const out = binds.map((v, i) => {
    if (v === undefined || v === null) return null;
    if (typeof v === 'string' || typeof v === 'boolean') return v;
    if (typeof v === 'number' && Number.isFinite(v)) return v;
    throw new RequestProblem(`binding ${i + 1} must be a string, number, boolean or null`);
  });
  return { sqlText, binds: out };
}

/** Whether a step body's `statement` member is a string literal of the expression (no value can reach the SQL text). */
export function statementIsLiteral(expression: string): boolean {
  let ast: jsonata.ExprNode;
  try {
    ast = jsonata(expression).ast();
  } catch {
    return false;
  }
  if (ast.type !== 'unary' || ast.value !== '{' || !Array.isArray(ast.lhs)) return false;
  // The lhs of an object constructor (unary `{`) is its [key, value] pairs.
  const pair = (ast.lhs as [jsonata.ExprNode, jsonata.ExprNode][]).find(([k]) => k.type === 'string' && k.value === 'statement');
  return pair !== undefined && pair[1].type === 'string';
}

/** snowflake-sdk's error, as a step sees it: network trouble is retried, the rest is not. */
export function mapSnowflakeError(err: unknown): Error {
  const e = err as { code?: unknown; sqlState?: unknown; name?: unknown; message?: unknown };
  const code = typeof e.code === 'number' ? e.code : Number(e.code);
  if (Number.isInteger(code) && code >= 401_000 && code < 402_000) return new ProviderUnavailable(`Snowflake could not be reached (${code})`);
  if (Number.isInteger(code) && code >= 390_000 && code < 391_000) return new ConnectorConfigError(`Snowflake refused the login (${code})`);
  if (typeof e.sqlState === 'string') return new RequestProblem(`Snowflake refused the statement (SQL state ${e.sqlState}, code ${String(e.code)})`);
  return new ProviderUnavailable(`Snowflake failed (${String(e.code ?? e.name ?? 'unknown')})`);
}
