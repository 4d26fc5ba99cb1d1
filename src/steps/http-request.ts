/**
 * http_request: {connector_id, operation_ref | method + path, params?, query?, headers?,
 * body?, paginate?}. params, query and headers are objects of name: expression; body one expression.
 * With operation_ref, params go where the operation declares them (path, query, header);
 * with method + path, params fill the path's {name} placeholders. Its output is the answer:
 * {status, headers, body}; with paginate, every page's items ({items, pages, next, last}).
 */
import { saverMayCallConnectors } from '../auth/access.ts';
import { claimedConnector } from '../connectors/connector-cache.ts';
import type { HttpRequestConfig, PaginateConfig } from '../db/tables.ts';
import { permanentFailure, quoteName, WorkFailure } from '../errors.ts';
import { isUuid } from '../ids.ts';
import { plainPath } from '../expressions/plain-path.ts';
import { isObject } from '../json.ts';
import type { CallParts } from '../connectors/call.ts';
import type { CallOutput, Effects } from './effects.ts';
import { checked, ConfigIssue, expression, expressionMap, membersOf, onlyMembers, text } from './config.ts';
import { evaluate, type StepContext, type StepType } from './step.ts';

/** A paged call's pages: max_pages when the step does not say, and the most it may say. */
export const DEFAULT_MAX_PAGES = 100;
export const MAX_PAGES = 1000;
/** The items of all the pages together, as JSON: past it the step fails (fewer pages a run, and the state's cursor for the rest). */
export const PAGED_ITEMS_MAX_BYTES = 5 * 1024 * 1024;

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
  onlyMembers(
    config,
    ['connector_id', 'operation_ref', 'method', 'path', 'params', 'query', 'headers', 'body', 'paginate'],
    at,
    "an http_request step's config",
  );
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
  if (config.paginate !== undefined && config.paginate !== null) out.paginate = readPaginate(config.paginate, `${at}/paginate`);
  return out;
}

function readPaginate(v: unknown, at: string): PaginateConfig {
  if (!isObject(v)) throw new ConfigIssue(at, 'paginate must be an object {items, next, max_pages?}');
  onlyMembers(v, ['items', 'next', 'max_pages'], at, 'paginate');
  const out: PaginateConfig = { items: expression(v, 'items', at, true)!, next: expression(v, 'next', at, true)! };
  if (v.max_pages !== undefined && v.max_pages !== null) {
    if (!Number.isInteger(v.max_pages) || (v.max_pages as number) < 1 || (v.max_pages as number) > MAX_PAGES)
      throw new ConfigIssue(`${at}/max_pages`, `max_pages must be an integer from 1 to ${MAX_PAGES}`);
    out.max_pages = v.max_pages as number;
  }
  return out;
}

/**
 * A `Link` header (RFC 8288) by rel: each target's URL and its query parameters, so that
 * `response.links.next.query` is the next page's parameters as `next` gives them.
 */
export function parseLinks(header: unknown): Record<string, { url: string; query: Record<string, string> }> {
  const text = Array.isArray(header) ? header.join(', ') : typeof header === 'string' ? header : '';
  const out: Record<string, { url: string; query: Record<string, string> }> = {};
  for (const m of text.matchAll(/<([^>]*)>((?:\s*;\s*[^;,]*)*)/g)) {
    const rel = /;\s*rel\s*=\s*(?:"([^"]*)"|([^\s;,]+))/i.exec(m[2]!);
    if (!rel) continue;
    const url = URL.parse(m[1]!, 'http://link.invalid');
    if (url === null) continue;
    const query = Object.fromEntries(url.searchParams);
    for (const name of (rel[1] ?? rel[2]!).toLowerCase().split(/\s+/)) if (name !== '' && !Object.hasOwn(out, name)) out[name] = { url: m[1]!, query };
  }
  return out;
}

/** What a paged call has done so far: kept with the run's checkpoint after each page (StepContext.saveProgress). */
interface Pages {
  pages: number;
  items: unknown[];
  /** Bytes of the items as JSON, for the cap. */
  bytes: number;
  /** The next page's parameters (null: the last page was fetched). */
  next: Record<string, unknown> | null;
  last: CallOutput;
}

/** What `next` gave, as the next page's parameters: nothing (null, false, an empty object) ends the list. */
function nextOf(v: unknown): Record<string, unknown> | null {
  if (v === undefined || v === null || v === false) return null;
  if (!isObject(v))
    throw permanentFailure(`paginate.next must give an object of parameters, or nothing on the last page; it gave ${Array.isArray(v) ? 'an array' : typeof v}`);
  return Object.keys(v).length === 0 ? null : v;
}

/** A page's items as for_each takes them: an array, one value as one item, nothing as none. */
const itemsOf = (v: unknown): unknown[] => (v === undefined || v === null ? [] : Array.isArray(v) ? v : [v]);

/**
 * The pages of a paged call, from where an earlier attempt stopped: each page is one call
 * (under the connector's rate budget, its own Idempotency-Key), its items and next
 * parameters evaluated over `response` and `page`, and recorded before the next is asked for,
 * so a retry never fetches a recorded page again.
 */
async function pagedCall(
  c: HttpRequestConfig & { paginate: PaginateConfig },
  ctx: StepContext,
  effects: Effects,
  first: (parts: CallParts, span: StepContext['span']) => Promise<CallOutput>,
  call: (page: number) => (parts: CallParts, span: StepContext['span']) => Promise<CallOutput>,
  base: CallParts,
): Promise<{ output: unknown }> {
  const max = Math.min(c.paginate.max_pages ?? DEFAULT_MAX_PAGES, effects.pageLimit ?? MAX_PAGES);
  const saved = ctx.progress as Pages | undefined;
  let at: Pages = saved ?? { pages: 0, items: [], bytes: 0, next: {}, last: null };
  while (at.next !== null && at.pages < max) {
    const params = { ...base.params };
    const query = { ...base.query };
    const given = Object.entries(at.next);
    const values = scalars(
      given.map(([k]) => k),
      given.map(([, v]) => v),
      'paginate.next',
    );
    for (const [name] of given) {
      // A name the step's params give is replaced there; any other is a query parameter.
      const into = Object.hasOwn(c.params ?? {}, name) ? params : query;
      if (values[name] === undefined) delete into[name];
      else into[name] = values[name];
    }
    const send = at.pages === 0 ? first : call(at.pages);
    const answer = await send({ ...base, params, query }, ctx.span);
    // Not sent (a test run): nothing to page through.
    if (answer === null) return { output: at.pages === 0 ? null : output(at) };
    const page = at.pages + 1;
    const input = { ...ctx.input, response: { ...answer, links: parseLinks(answer.headers.link) }, page };
    const [items, next] = (await evaluate(ctx, { input, expressions: [c.paginate.items, c.paginate.next] }))[0]!;
    const got = itemsOf(items);
    const bytes = at.bytes + Buffer.byteLength(JSON.stringify(got)) - 2 + (at.items.length > 0 && got.length > 0 ? 1 : 0);
    if (bytes > PAGED_ITEMS_MAX_BYTES)
      throw permanentFailure(
        `The items of ${page} pages come to more than ${PAGED_ITEMS_MAX_BYTES} bytes as JSON: lower max_pages (or the page size), and continue from the state's cursor in the next run`,
      );
    at = { pages: page, items: [...at.items, ...got], bytes, next: nextOf(next), last: answer };
    if (ctx.saveProgress && at.next !== null && at.pages < max && !(await ctx.saveProgress(at)))
      throw new WorkFailure('The run was taken over by another attempt', { transient: true });
  }
  return { output: output(at) };
}

const output = (at: Pages) => ({ items: at.items, pages: at.pages, next: at.next, last: at.last });

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
    if (h.paginate) expressions.push(['paginate/items', h.paginate.items], ['paginate/next', h.paginate.next]);
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
    const runtime = ctx.connectors;
    // The Idempotency-Key's last part is the page: 0 for a call that is not paged.
    const call = (page: number) => effects.callOut({ key: instance, runtime, row, target: c, idempotencyKey: `${run.id}:${instance}:${page}` });
    const send = call(0);
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
    const parts = { params: params!, query: query!, headers: sent!, body: c.body === undefined ? undefined : values[offset] };
    if (c.paginate) return pagedCall({ ...c, paginate: c.paginate }, ctx, effects, send, call, parts);
    return { output: await send(parts, ctx.span) };
  },
};
