/**
 * http_request: {connector_id, operation_ref | method + path, params?, query?, headers?,
 * body?}. params, query and headers are objects of name: expression; body one expression.
 * With operation_ref, params go where the operation declares them (path, query, header);
 * with method + path, params fill the path's {name} placeholders. Its output is the answer:
 * {status, headers, body}.
 */
import { saverMayCallConnectors } from '../auth/access.ts';
import { claimedConnector } from '../connectors/connector-cache.ts';
import type { HttpRequestConfig } from '../db/tables.ts';
import { permanentFailure, quoteName } from '../errors.ts';
import { isUuid } from '../ids.ts';
import { plainPath } from '../expressions/plain-path.ts';
import { checked, ConfigIssue, expression, expressionMap, membersOf, onlyMembers, text } from './config.ts';
import { evaluate, type StepType } from './step.ts';

export const HTTP_METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'] as const;
/** An HTTP header name (RFC 9110 token). */
const HEADER_NAME = /^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$/;
/** Set by the connector or the transport, never by a step. */
const RESERVED_HEADERS = new Set([
  'host',
  'content-length',
  'transfer-encoding',
  'connection',
  'authorization',
  'cookie',
  'te',
  'upgrade',
  'proxy-authorization',
  'webhook-id',
  'webhook-timestamp',
  'webhook-signature',
]);
export const PATH_PARAM = /\{([A-Za-z0-9_.-]{1,64})\}/g;

const headerName = (k: string, pointer: string) => {
  if (!HEADER_NAME.test(k) || RESERVED_HEADERS.has(k.toLowerCase()))
    throw new ConfigIssue(pointer, `${quoteName(k)} cannot be set by a step (an HTTP header name other than ${[...RESERVED_HEADERS].join(', ')})`);
};

function readHttpRequest(config: Record<string, unknown>): HttpRequestConfig {
  const at = '';
  onlyMembers(config, ['connector_id', 'operation_ref', 'method', 'path', 'params', 'query', 'headers', 'body'], at, "an http_request step's config");
  if (!isUuid(config.connector_id)) throw new ConfigIssue(`${at}/connector_id`, 'connector_id must be the id of an outbound connector');
  const out: HttpRequestConfig = { connector_id: config.connector_id.toLowerCase() };
  const hasRef = config.operation_ref !== undefined && config.operation_ref !== null;
  const hasPath = config.method !== undefined || config.path !== undefined;
  if (hasRef === hasPath) throw new ConfigIssue(at, 'an http_request step needs either operation_ref or method and path');
  if (hasRef) {
    out.operation_ref = text(config, 'operation_ref', at, { required: true, max: 300 })!;
  } else {
    const method = typeof config.method === 'string' ? config.method.toUpperCase() : undefined;
    if (method === undefined || !(HTTP_METHODS as readonly string[]).includes(method))
      throw new ConfigIssue(`${at}/method`, `method must be one of ${HTTP_METHODS.join(', ')}`);
    const path = text(config, 'path', at, { required: true, max: 2000 })!;
    if (!path.startsWith('/') || path.startsWith('//') || /[\s#]/.test(path))
      throw new ConfigIssue(`${at}/path`, 'path must start with / (one), relative to the connector base URL, without spaces or #');
    out.method = method;
    out.path = path;
  }
  const params = expressionMap(config, 'params', at);
  const query = expressionMap(config, 'query', at);
  const headers = expressionMap(config, 'headers', at, headerName);
  if (!hasRef) {
    for (const m of out.path!.matchAll(PATH_PARAM)) {
      if (params?.[m[1]!] === undefined) throw new ConfigIssue(`${at}/params`, `the path names {${m[1]}}: params must give it`);
    }
  }
  if (params) out.params = params;
  if (query) out.query = query;
  if (headers) out.headers = headers;
  const body = expression(config, 'body', at, false);
  if (body !== null) out.body = body;
  return out;
}

/** A step's computed parameter or header: a string, number or boolean, as text; nothing leaves it out. */
function scalars(names: string[], values: unknown[], what: string): Record<string, string> {
  const out: Record<string, string> = {};
  names.forEach((name, i) => {
    const v = values[i];
    if (v === undefined || v === null) return;
    if (typeof v !== 'string' && typeof v !== 'number' && typeof v !== 'boolean')
      throw permanentFailure(`${what}.${name} must be a string, number or boolean; the expression gave ${Array.isArray(v) ? 'an array' : typeof v}`);
    const text = String(v);
    if (/[\r\n\0]/.test(text)) throw permanentFailure(`${what}.${name} must not hold line breaks or NUL`);
    out[name] = text;
  });
  return out;
}

/** The values of the expressions when every one is a plain path (plain-path.ts), read here; else undefined, for the pool. */
function plainPaths(expressions: string[], input: unknown): unknown[] | undefined {
  const values: unknown[] = [];
  for (const e of expressions) {
    const read = plainPath(e, input);
    if (read === undefined) return undefined;
    values.push(read.value);
  }
  return values;
}

const SAVER_MAY_NOT_CALL_OUT =
  'The steps of this workflow version were saved by a membership that is no longer an active admin or owner, so they may not call out through a connector: an admin or owner must save the workflow again';

export const httpRequest: StepType<HttpRequestConfig> = {
  type: 'http_request',
  checkpoint: 'now',
  validate: (config) => checked(() => readHttpRequest(config)),
  describe: (h) => {
    const expressions = [...membersOf('params', h.params), ...membersOf('query', h.query), ...membersOf('headers', h.headers)];
    if (h.body !== undefined) expressions.push(['body', h.body]);
    return { expressions, connector: h.connector_id };
  },
  run: async (c, ctx, effects) => {
    const { run, reads } = ctx;
    if (!ctx.connectors) throw permanentFailure('This worker cannot call out');
    // Checked at every attempt, not only at save: a saver demoted or deactivated since stops the calls.
    reads.saverMay ??= saverMayCallConnectors(run.saver ?? undefined);
    if (!reads.saverMay) throw permanentFailure(SAVER_MAY_NOT_CALL_OUT);
    const rows = reads.connectors;
    if (!rows.has(c.connector_id))
      rows.set(c.connector_id, await claimedConnector(ctx.db, ctx.connectors.kept, run.workspace_id, c.connector_id, run.connector_versions));
    const row = rows.get(c.connector_id);
    if (!row) throw permanentFailure('The connector of this step no longer exists in the workspace');
    // The target is checked against the connector before any expression is evaluated.
    // An item's call has its own idempotency key (its instance, `loop[2].call`): the same for every attempt of it.
    const instance = ctx.instance ?? ctx.key;
    const send = effects.callOut({ key: instance, runtime: ctx.connectors, row, target: c, idempotencyKey: `${run.id}:${instance}:0` });
    // Every expression of the step in one job: params, query, headers, then the body.
    const groups = (['params', 'query', 'headers'] as const).map((what) => ({
      what,
      names: Object.keys(c[what] ?? {}),
      expressions: Object.values(c[what] ?? {}),
    }));
    const expressions = groups.flatMap((g) => g.expressions);
    if (c.body !== undefined) expressions.push(c.body);
    const values = expressions.length === 0 ? [] : (plainPaths(expressions, ctx.input) ?? (await evaluate(ctx, { input: ctx.input, expressions }))[0]!);
    let offset = 0;
    const [params, query, sent] = groups.map((g) => scalars(g.names, values.slice(offset, (offset += g.names.length)), g.what));
    return { output: await send({ params: params!, query: query!, headers: sent!, body: c.body === undefined ? undefined : values[offset] }, ctx.span) };
  },
};
