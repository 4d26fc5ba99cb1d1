/**
 * A connector's HTTP calls: the request built from a connector row, its credentials added,
 * the response read, an oauth2 token fetched again once on a 401 (call.ts picks the driver
 * and takes the rate budget). One runtime per process: its HTTP pool, token cache and the
 * opened secrets of inbound connectors are shared by every worker slot and request.
 */
import type { Metrics } from '../metrics.ts';
import type { Db } from '../db/connect.ts';
import type { Limiter } from '../limiter.ts';
import { openSecret } from '../secret-box.ts';
import { authorize, sentCredentials, tokenCache, type ConnectorRecord, type TokenCache } from './auth.ts';
import { ConnectorConfigError, RequestProblem } from './errors.ts';
import type { ConnectorRow } from './connectors.sql.ts';
import { httpClient, type HttpClient, type OutboundResponse } from './http.ts';
import { databaseCounter, limiterCounter, type WindowCounter } from './rate.ts';
import { redactError, redactor } from './redact.ts';
import { connectorCache, type ConnectorCache } from './connector-cache.ts';
import { REDACTED } from '../log.ts';
import type { TraceSpan } from '../tracing.ts';

export interface ConnectorRuntime {
  http: HttpClient;
  tokens: TokenCache;
  counter: WindowCounter;
  connectorKey: Buffer;
  allowPrivateEgress: boolean;
  clock: () => number;
  /** Where provider calls are counted. */
  metrics: Pick<Metrics, 'providerCall'>;
  /** An inbound connector's secret, opened from its sealed text; undefined when it cannot be opened. */
  inboundSecret(sealed: string): string | undefined;
  /** Connectors kept between runs, by the version their claim read (connector-cache.ts). */
  kept: ConnectorCache;
  close(): Promise<void>;
}

/** Opened inbound secrets kept at once: opening one costs more than the rest of a delivery's checks. */
const OPENED_SECRETS = 1000;

/** Secrets by their sealed text, the oldest dropped past OPENED_SECRETS. */
function openedSecrets(connectorKey: Buffer): (sealed: string) => string | undefined {
  const opened = new Map<string, string>();
  return (sealed) => {
    let s = opened.get(sealed);
    if (s === undefined) {
      try {
        s = openSecret(connectorKey, sealed);
      } catch {
        return undefined;
      }
      if (opened.size >= OPENED_SECRETS) opened.delete(opened.keys().next().value!);
      opened.set(sealed, s);
    }
    return s;
  };
}

export function connectorRuntime(deps: {
  db: Db;
  engine: 'pglite' | 'postgres';
  limiter: Limiter;
  connectorKey: Buffer;
  clock: () => number;
  config: { allowPrivateEgress: boolean; redisUrl: string | undefined };
  metrics: Pick<Metrics, 'providerCall'>;
}): ConnectorRuntime {
  const http = httpClient({ allowPrivateEgress: deps.config.allowPrivateEgress });
  // Redis when there is one; without it, PostgreSQL is what several processes share.
  const counter = deps.config.redisUrl === undefined && deps.engine === 'postgres' ? databaseCounter(deps.db) : limiterCounter(deps.limiter);
  return {
    http,
    tokens: tokenCache(http, deps.config.allowPrivateEgress, deps.clock),
    counter,
    connectorKey: deps.connectorKey,
    allowPrivateEgress: deps.config.allowPrivateEgress,
    clock: deps.clock,
    metrics: deps.metrics,
    inboundSecret: openedSecrets(deps.connectorKey),
    kept: connectorCache(),
    close: () => http.close(),
  };
}

/**
 * Records opened, by the row they were opened from: a kept row (connector-cache.ts) has its
 * secret opened once, not at every call; a row read afresh is a new object and opens afresh.
 */
const openedRecords = new WeakMap<ConnectorRow, { key: Buffer; record: ConnectorRecord }>();

export function connectorRecord(rt: Pick<ConnectorRuntime, 'connectorKey'>, row: ConnectorRow): ConnectorRecord {
  const opened = openedRecords.get(row);
  if (opened !== undefined && opened.key === rt.connectorKey) return opened.record;
  let secret: string | undefined;
  if (row.secret_ciphertext !== null) {
    try {
      secret = openSecret(rt.connectorKey, row.secret_ciphertext);
    } catch {
      throw new ConnectorConfigError("The connector's secret cannot be opened with this installation's key; set it again");
    }
  }
  const record = { id: row.id, auth_type: row.auth_type, type: row.type, config: row.config, secret, updated_at: new Date(row.updated_at) };
  openedRecords.set(row, { key: rt.connectorKey, record });
  return record;
}

/** Where a connector's relative paths go: config.base_url, else the attached specification's first absolute server. */
export function baseUrlOf(row: Pick<ConnectorRow, 'config' | 'servers'>): string {
  const base = row.config?.base_url;
  if (typeof base === 'string' && base !== '') return base;
  const server = (row.servers ?? []).find((s) => /^https?:\/\//i.test(s.url));
  if (server) return server.url;
  throw new ConnectorConfigError('The connector has no config.base_url and its specification no absolute server');
}

export interface HttpCall {
  method: string;
  /** A path relative to the base URL (its own query string allowed). */
  path: string;
  /** The path as the operation or step wrote it, {placeholders} unfilled: the filled path must keep its shape. */
  template?: string;
  query?: Record<string, string>;
  headers?: Record<string, string>;
  /** Sent as JSON unless it is a string. */
  body?: unknown;
  /** Names the call so a provider can recognize a retry (unsafe methods). */
  idempotencyKey?: string;
}

const UNSAFE = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

const segments = (path: string) => path.split('?')[0]!.replace(/^\//, '').split('/').length;

/**
 * The URL of a call: `path` under the base URL. Whatever a parameter held, the result stays
 * under the base URL's path and has as many segments as the template it was filled from, so
 * no value can make it another endpoint of the provider.
 */
export function buildUrl(base: string, path: string, query: Record<string, string> | undefined, template?: string): URL {
  // The slash goes on the path: after a query string base_url carries, it would change that query's last value.
  const url = new URL(base);
  if (!url.pathname.endsWith('/')) url.pathname = `${url.pathname}/`;
  const rel = path.startsWith('/') ? path.slice(1) : path;
  const full = new URL(rel, url);
  // A path may not climb out of the base URL's host.
  if (full.origin !== url.origin) throw new ConnectorConfigError(`The path ${JSON.stringify(path.slice(0, 200))} leaves the connector's base URL`);
  if (!full.pathname.startsWith(url.pathname))
    throw new RequestProblem(`The path ${JSON.stringify(path.slice(0, 200))} leaves the base URL's path ${url.pathname}`);
  if (template !== undefined && segments(full.pathname.slice(url.pathname.length)) !== segments(template)) {
    throw new RequestProblem(`The path ${JSON.stringify(path.slice(0, 200))} does not keep the shape of ${JSON.stringify(template.slice(0, 200))}`);
  }
  for (const [k, v] of Object.entries(query ?? {})) full.searchParams.append(k, v);
  return full;
}

/** One HTTP call through the connector, with its credentials (its budget is taken by call.ts). */
/** The request of a call before its credentials are added: what callHttp and previewHttp share. */
function plainRequest(row: ConnectorRow, call: HttpCall) {
  const url = buildUrl(baseUrlOf(row), call.path, call.query, call.template);
  const method = call.method.toUpperCase();
  const headers: Record<string, string> = { accept: 'application/json' };
  for (const [k, v] of Object.entries(call.headers ?? {})) headers[k.toLowerCase()] = v;
  let body: string | undefined;
  if (call.body !== undefined && call.body !== null && method !== 'GET' && method !== 'HEAD') {
    body = typeof call.body === 'string' ? call.body : JSON.stringify(call.body);
    if (typeof call.body !== 'string') headers['content-type'] ??= 'application/json';
  }
  if (call.idempotencyKey !== undefined && UNSAFE.has(method)) headers['idempotency-key'] ??= call.idempotencyKey;
  return { url, method, headers, body };
}

/** What a test run shows of a call: the request as callHttp would send it. */
export interface HttpPreview {
  method: string;
  url: string;
  /** The connector's credential headers are there with their values redacted. */
  headers: Record<string, string>;
  body: unknown;
}

// A test run fetches no oauth2 token: the header is shown, its value redacted either way.
const NO_TOKENS: TokenCache = { token: async () => REDACTED, forget: () => undefined };

/**
 * The request callHttp would send, credentials added by the same authorize and then
 * redacted: every header the connector's auth added, and every spelling of its secret anywhere.
 */
export async function previewHttp(rt: Pick<ConnectorRuntime, 'connectorKey' | 'clock'>, row: ConnectorRow, call: HttpCall): Promise<HttpPreview> {
  const connector = connectorRecord(rt, row);
  const { url, method, headers, body } = plainRequest(row, call);
  const { request } = await authorize(connector, { method, url, headers, body }, NO_TOKENS, call.idempotencyKey, Math.floor(rt.clock() / 1000));
  const shown: Record<string, string> = {};
  for (const [k, v] of Object.entries(request.headers)) shown[k] = headers[k] === v ? v : REDACTED;
  const redact = redactor(sentCredentials(connector));
  let sentBody: unknown = body;
  if (body !== undefined && typeof call.body !== 'string') sentBody = call.body;
  return redact({ method, url: url.toString(), headers: shown, body: sentBody ?? null });
}

/** With a span (tracing.ts), the request carries it as `traceparent`, over any header of that name the step set. */
export async function callHttp(rt: ConnectorRuntime, row: ConnectorRow, call: HttpCall, span?: TraceSpan): Promise<OutboundResponse> {
  const connector = connectorRecord(rt, row);
  const { url, method, headers, body } = plainRequest(row, call);
  if (span !== undefined) {
    span.set({ 'http.request.method': method, 'server.address': url.hostname, 'server.port': Number(url.port || (url.protocol === 'https:' ? 443 : 80)) });
    headers.traceparent = span.traceparent;
    if (span.tracestate === undefined) delete headers.tracestate;
    else headers.tracestate = span.tracestate;
  }
  // What comes back (an answer, an error quoting one) is stored with the run and shown to
  // members: every credential sent is cut out of it, whatever spelling the provider echoes.
  const sent = sentCredentials(connector);
  const send = async () => {
    const { request, sent: fetched } = await authorize(
      connector,
      { method, url, headers, body },
      rt.tokens,
      call.idempotencyKey,
      Math.floor(rt.clock() / 1000),
    );
    sent.push(...fetched);
    return rt.http.send(request);
  };
  try {
    let res = await send();
    if (res.status === 401 && connector.auth_type === 'oauth2') {
      // The token may have been revoked or rotated early: one fresh token, one more try.
      rt.tokens.forget(connector);
      span?.set({ 'http.request.resend_count': 1 });
      res = await send();
    }
    return redactor(sent)(res);
  } catch (err) {
    throw redactError(err, redactor(sent));
  }
}
