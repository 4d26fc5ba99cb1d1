/** The generic read endpoints, list and by id, that every JSON:API type gets. */
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteShorthandOptions } from 'fastify';
import type { Deps } from '../../deps.ts';
import type { Db } from '../../db/connect.ts';
import { AppError, invalidParam } from '../../errors.ts';
import { isUuid } from '../../ids.ts';
import { REDACTED } from '../../log.ts';
import { looksLikeSecret } from '../../secrets.ts';
import { claimedPrincipal, principalFromAccount, type Principal } from '../../auth/principal.ts';
import { authorize, typePermission } from '../../auth/access.ts';
import { loadAccountById, loadAccountWith, loadAccountWithCompiled, withAccountStatement, type AccountRow } from '../../auth/auth.sql.ts';
import type { TokenClaims } from '../../auth/tokens.ts';
import { compileOnce, slot, type CompiledOnce } from '../../db/compiled.ts';
import { API_PREFIX, buildDocument, documentText, isBuiltDocument, resourceObject, serializeList, type DocumentOptions } from './document.ts';
import {
  countVisible,
  findVisible,
  listQuery,
  listSlotValues,
  listStatementOnce,
  SLOT_PRINCIPAL,
  takeBudgetMarks,
  visibleRowById,
  type ListStatements,
} from './read.sql.ts';
import { encodeCursor, parseQuery } from './query.ts';
import { finishKeysetPage } from './list.sql.ts';
import type { ResourceType, TypeRegistry } from '../../resources/resource.ts';
import type { ParsedQuery } from './types.ts';
import { JSONAPI_MEDIA_TYPE } from './errors.ts';
import { readAttributes } from './input.ts';
import type { InputSchema } from '../../input.ts';

type RawQuery = Record<string, string | string[] | undefined>;

/** A type's reads: the account is re-checked in the handler's one statement, with the rows it reads. */
export const readOptions = (type: string): RouteShorthandOptions => ({
  config: { permission: typePermission(type, 'read'), rateLimit: 'account', deferAccount: true },
});
export const writeOptions = (type: string): RouteShorthandOptions => ({
  config: { permission: typePermission(type, 'write'), rateLimit: 'account', idempotent: true },
});

export const deleteOptions = (type: string): RouteShorthandOptions => ({
  config: { permission: typePermission(type, 'delete'), rateLimit: 'account', idempotent: true },
});

export function sendDocument(reply: FastifyReply, status: number, doc: unknown): FastifyReply {
  return reply
    .code(status)
    .type(JSONAPI_MEDIA_TYPE)
    .send(isBuiltDocument(doc) ? documentText(doc) : JSON.stringify(doc));
}

export function parseFor(request: FastifyRequest, registry: TypeRegistry, type: ResourceType, list: boolean): ParsedQuery {
  return parseQuery(request.query as RawQuery, type, { registry: (name) => registry.get(name), list });
}

const notFound = (type: ResourceType) => new AppError('not_found', `No ${type.type} with this id`);

/** 404 for ids that are malformed, absent, or not visible: the three read the same. */
export async function findOr404(db: Db, type: ResourceType, principal: Principal, id: string): Promise<Record<string, any>> {
  const row = isUuid(id) ? await findVisible(db, type, principal, id.toLowerCase()) : undefined;
  if (!row) throw notFound(type);
  return row;
}

function pageUrl(path: string, raw: RawQuery, page: Record<string, string>, keepPage = false): string {
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(raw)) {
    if (!keepPage && k.startsWith('page[') && k !== 'page[limit]' && k !== 'page[count]') continue;
    // A secret a client filtered by is not repeated where proxies, caches and logs keep it.
    if (typeof v === 'string') params.set(k, k.startsWith('filter[') && looksLikeSecret(v) ? REDACTED : v);
  }
  for (const [k, v] of Object.entries(page)) params.set(`page[${k}]`, v);
  const qs = params.toString();
  return qs ? `${path}?${qs.replace(/%5B/g, '[').replace(/%5D/g, ']')}` : path;
}

/** A list page's links and meta.page: offset links step by the rows the page holds, cursors are offered on every page. */
function listLinksAndMeta(
  path: string,
  raw: RawQuery,
  q: ParsedQuery,
  rows: Record<string, any>[],
  hasNext: boolean,
  hasPrev: boolean,
  total: number | undefined,
): Omit<DocumentOptions, 'now'> {
  // self is the page that was asked for, offset or cursor included.
  const links: Record<string, string | null> = { self: pageUrl(path, raw, {}, true) };
  const page: Record<string, unknown> = { limit: q.page.limit };
  if (q.page.kind === 'offset') {
    const { limit, offset } = q.page;
    page.offset = offset;
    links.first = pageUrl(path, raw, { offset: '0' });
    links.next = hasNext ? pageUrl(path, raw, { offset: String(offset + rows.length) }) : null;
    links.prev = offset > 0 ? pageUrl(path, raw, { offset: String(Math.max(0, offset - limit)) }) : null;
  }
  const first = rows[0];
  const last = rows.at(-1);
  if (last && first) {
    const nextCursor = encodeCursor(q.sort, last);
    const prevCursor = encodeCursor(q.sort, first);
    page.next_cursor = hasNext ? nextCursor : null;
    page.prev_cursor = hasPrev ? prevCursor : null;
    if (q.page.kind === 'keyset') {
      links.next = hasNext ? pageUrl(path, raw, { after: nextCursor }) : null;
      links.prev = hasPrev ? pageUrl(path, raw, { before: prevCursor }) : null;
    }
  }
  if (total !== undefined) page.total = total;
  return { links, meta: { page } };
}

const claimedSlots = (claims: TokenClaims) => ({ credentialId: claims.sub, organizationId: claims.org, workspaceId: claims.ws });

/** A list's rows as read, with the query and the principal they were read for. */
interface ReadList {
  q: ParsedQuery;
  principal: Principal;
  fetched: Record<string, any>[];
}

/** The re-check of a deferAccount route: the account as read beside its rows, then the route's permission. */
function acceptAccount(request: FastifyRequest, account: AccountRow | undefined): Principal {
  const principal = principalFromAccount(request.claims!, account);
  authorize(principal, request.routeOptions.config.permission!);
  request.principal = principal;
  return principal;
}

/** Reads a list in one statement with the account re-check, like a read by id. */
async function readList(deps: Deps, registry: TypeRegistry, type: ResourceType, request: FastifyRequest, statements: ListStatements): Promise<ReadList> {
  const claims = request.claims!;
  let q: ParsedQuery;
  try {
    q = parseFor(request, registry, type, true);
  } catch (err) {
    // The account's 401/403 come before a bad query's 400, as on every other route.
    acceptAccount(request, await loadAccountById(deps.db, claims.sub));
    throw err;
  }
  const once = listStatementOnce(statements, deps.db, type, SLOT_PRINCIPAL, q, deps.config.listMaxBytes, (rows) =>
    withAccountStatement(deps.db, slot('accountId'), { rows }),
  );
  const found = once
    ? await loadAccountWithCompiled(deps.db, once, { accountId: claims.sub, ...claimedSlots(claims), ...listSlotValues(q) })
    : await loadAccountWith(deps.db, claims.sub, { rows: listQuery(deps.db, type, claimedPrincipal(claims), q, deps.config.listMaxBytes) });
  return { q, principal: acceptAccount(request, found.account), fetched: found.rows };
}

/**
 * The list document within LIST_MAX_BYTES. Rows past the budget stayed in the database: a
 * default page is the shorter page that fits, and links on; a page[limit] asked for past
 * the budget is 400 with a hint, before or after the document is built.
 */
async function sizedListDocument(deps: Deps, registry: TypeRegistry, type: ResourceType, path: string, raw: RawQuery, list: ReadList): Promise<string> {
  const { q, principal } = list;
  const max = deps.config.listMaxBytes;
  const hint = `fewer attributes with fields[${type.type}]=...`;
  const asked = raw['page[limit]'] !== undefined;
  const budgeted = takeBudgetMarks(list.fetched);
  const backwards = q.page.kind === 'keyset' && q.page.before !== undefined;
  if (budgeted.cut && asked) {
    const fit = Math.max(1, budgeted.rows.length - 1);
    throw invalidParam(
      'page[limit]',
      `This page would be larger than ${max} bytes (LIST_MAX_BYTES); about ${fit} ${type.type} resources fit: ask for page[limit]=${fit}, or for ${hint}`,
    );
  }
  let page = finishKeysetPage(budgeted.rows, q);
  if (budgeted.cut) page = backwards ? { ...page, hasPrev: true } : { ...page, hasNext: true };
  const count = q.count ? await countVisible(deps.db, type, principal, q) : undefined;
  const build = ({ rows, hasNext, hasPrev }: typeof page) =>
    buildDocument(deps.db, registry, principal, type, rows, q, {
      ...listLinksAndMeta(path, raw, q, rows, hasNext, hasPrev, count),
      now: new Date(deps.clock()),
    });
  let body = serializeList(await build(page), max);
  if ('over' in body && body.over === 'data' && !asked) {
    // A default page never fails: it holds what fits and links to the rest.
    const shorter = backwards
      ? { rows: page.rows.slice(page.rows.length - body.fit), hasNext: page.hasNext, hasPrev: true }
      : { rows: page.rows.slice(0, body.fit), hasNext: true, hasPrev: page.hasPrev };
    body = serializeList(await build(shorter), max);
  }
  if ('over' in body) {
    if (body.over === 'included')
      throw invalidParam(
        'include',
        `This page with its included resources would be larger than ${max} bytes (LIST_MAX_BYTES); include fewer relationships, ask for a smaller page[limit], or ${hint}`,
      );
    throw invalidParam(
      'page[limit]',
      `This page would be larger than ${max} bytes (LIST_MAX_BYTES); ${body.fit} ${type.type} resources fit: ask for page[limit]=${body.fit}, or for ${hint}`,
    );
  }
  return body.text;
}

export function registerReadRoutes(app: FastifyInstance, deps: Deps, registry: TypeRegistry, type: ResourceType): void {
  const path = `${API_PREFIX}/${type.path}`;
  const options = readOptions(type.type);

  const statements: ListStatements = new Map();
  app.get(path, options, async (request, reply) => {
    const list = await readList(deps, registry, type, request, statements);
    const text = await sizedListDocument(deps, registry, type, path, request.query as RawQuery, list);
    return reply.code(200).type(JSONAPI_MEDIA_TYPE).send(text);
  });

  let byId: CompiledOnce | undefined;
  app.get(`${path}/:id`, options, async (request, reply) => {
    const id = (request.params as { id: string }).id;
    const claims = request.claims!;
    byId ??= compileOnce(withAccountStatement(deps.db, slot('accountId'), { rows: visibleRowById(deps.db, type, SLOT_PRINCIPAL, slot('id')) }));
    const found = isUuid(id)
      ? await loadAccountWithCompiled(deps.db, byId, { accountId: claims.sub, id: id.toLowerCase(), ...claimedSlots(claims) })
      : { account: await loadAccountById(deps.db, claims.sub), rows: [] };
    const principal = acceptAccount(request, found.account);
    const row = found.rows[0];
    if (!row) throw notFound(type);
    const q = parseFor(request, registry, type, false);
    return sendDocument(
      reply,
      200,
      await buildDocument(deps.db, registry, principal, type, row, q, { links: { self: `${path}/${row.id}` }, now: new Date(deps.clock()) }),
    );
  });
}

/** What a write returns: the row, and the response document's `meta` if it has one (an api_spec update reports what changed in its operations). */
export interface Written {
  row: Record<string, any>;
  meta?: Record<string, unknown>;
}

/** A write service that answers with its row alone. */
export function rowOnly<A extends unknown[]>(write: (...args: A) => Promise<Record<string, any>>): (...args: A) => Promise<Written> {
  return async (...args) => ({ row: await write(...args) });
}

export interface WriteHandlers {
  /** Writable attributes: the create rules; on update every attribute is optional. */
  input: InputSchema;
  create(db: Db, principal: Principal, attrs: Record<string, unknown>): Promise<Written>;
  update(db: Db, principal: Principal, existing: Record<string, any>, attrs: Record<string, unknown>): Promise<Written>;
  /** The routes' body limit when the type takes larger documents than the default. */
  bodyLimit?: number;
}

/** A type's delete service: `undropped` names indexes left behind after the commit, which the route logs. */
export type DeleteHandler = (db: Db, principal: Principal, id: string) => Promise<void | { undropped: string[] }>;

/**
 * DELETE for a type declared `deletable`: 204 with no body. An id the caller cannot see is
 * 404, as on reads; the second DELETE of an id is 404, but a retry with the first one's
 * Idempotency-Key replays its 204 (idempotent-replayed: true).
 */
export function registerDeleteRoute(app: FastifyInstance, deps: Deps, type: ResourceType, remove: DeleteHandler): void {
  if (type.deletable !== true) throw new Error(`${type.type} is not declared deletable (resources/${type.path}/resource.ts)`);
  app.delete(`${API_PREFIX}/${type.path}/:id`, deleteOptions(type.type), async (request, reply) => {
    const existing = await findOr404(deps.db, type, request.principal!, (request.params as { id: string }).id);
    const done = await remove(deps.db, request.principal!, String(existing.id));
    if (done && done.undropped.length > 0)
      request.log.warn({ type: type.type, id: existing.id, indexes_of_fields: done.undropped }, 'delete: indexes left to drop');
    // An empty text rather than nothing: the Idempotency-Key hook stores only a text answer.
    return reply.code(204).send('');
  });
}

/** POST (201 with Location) and PATCH for a writable type; Idempotency-Key applies to both. */
export function registerWriteRoutes(app: FastifyInstance, deps: Deps, registry: TypeRegistry, type: ResourceType, handlers: WriteHandlers): void {
  const path = `${API_PREFIX}/${type.path}`;
  const options = handlers.bodyLimit === undefined ? writeOptions(type.type) : { ...writeOptions(type.type), bodyLimit: handlers.bodyLimit };
  const meta = (written: Written) => (written.meta === undefined ? {} : { meta: written.meta });
  app.post(path, options, async (request, reply) => {
    const q = parseFor(request, registry, type, false);
    const attrs = readAttributes(request.body, { type: type.type, relationships: type.relationships }, handlers.input);
    const written = await handlers.create(deps.db, request.principal!, attrs);
    const row = written.row;
    reply.header('location', `${path}/${row.id}`);
    return sendDocument(
      reply,
      201,
      await buildDocument(deps.db, registry, request.principal!, type, row, q, {
        links: { self: `${path}/${row.id}` },
        now: new Date(deps.clock()),
        ...meta(written),
      }),
    );
  });
  app.patch(`${path}/:id`, options, async (request, reply) => {
    const q = parseFor(request, registry, type, false);
    const existing = await findOr404(deps.db, type, request.principal!, (request.params as { id: string }).id);
    const read = resourceObject(type, existing, undefined, undefined, new Date(deps.clock()));
    const current = { ...(read.attributes as object), ...(read.relationships as object | undefined) };
    const attrs = readAttributes(request.body, { type: type.type, id: String(existing.id), relationships: type.relationships, current }, handlers.input);
    const written = await handlers.update(deps.db, request.principal!, existing, attrs);
    const row = written.row;
    return sendDocument(
      reply,
      200,
      await buildDocument(deps.db, registry, request.principal!, type, row, q, {
        links: { self: `${path}/${row.id}` },
        now: new Date(deps.clock()),
        ...meta(written),
      }),
    );
  });
}
