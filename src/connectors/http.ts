/**
 * Outbound HTTP for connectors, through undici: timeouts for connecting, for the response
 * headers and for each pause in the body; a cap on the response size; redirects returned,
 * never followed; and the egress rules (egress.ts) applied to the address actually connected
 * to. A host name is resolved by our own lookup, which refuses it when any of its addresses
 * is refused (so a name that resolves there, or changes to resolve there between a check
 * and the connection, does not get through), unless ALLOW_PRIVATE_EGRESS=true.
 */
import dns from 'node:dns';
import type { LookupAddress, LookupOptions } from 'node:dns';
import { Agent, request, type Dispatcher } from 'undici';
import { ownAddresses, privateHostReason, refusedAddressReason } from '../egress.ts';
import { UNSTORABLE_TEXT } from '../errors.ts';
import { isJsonMediaType, mayHoldUnstorableText, unstorableTextAt } from '../json.ts';
import { EgressRefused, RequestProblem } from './errors.ts';

export interface HttpLimits {
  connectTimeoutMs: number;
  headersTimeoutMs: number;
  bodyTimeoutMs: number;
  maxResponseBytes: number;
}

export const DEFAULT_HTTP_LIMITS: HttpLimits = { connectTimeoutMs: 5_000, headersTimeoutMs: 15_000, bodyTimeoutMs: 15_000, maxResponseBytes: 5 * 1_048_576 };

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/** dns.lookup that refuses names resolving to addresses the service may not call (also given to the S3 client's agents). */
export function guardedLookup(hostname: string, options: LookupOptions, callback: LookupCallback): void {
  dns.lookup(hostname, { ...options, all: true }, (err, addresses) => {
    if (err) return callback(err, []);
    const list = addresses as LookupAddress[];
    const own = ownAddresses();
    for (const a of list) {
      const reason = refusedAddressReason(a.address, own);
      if (reason !== undefined)
        return callback(new EgressRefused(`${hostname} resolves to ${reason}; set ALLOW_PRIVATE_EGRESS=true to allow it`) as NodeJS.ErrnoException, []);
    }
    if (options.all) return callback(null, list);
    const first = list[0];
    if (!first) return callback(Object.assign(new Error(`${hostname} has no address`), { code: 'ENOTFOUND' }), []);
    callback(null, first.address, first.family);
  });
}

export interface OutboundRequest {
  method: string;
  url: URL;
  headers: Record<string, string>;
  body?: string | Buffer | undefined;
}

export interface OutboundResponse {
  status: number;
  headers: Record<string, string>;
  /** Parsed JSON when the response says JSON and parses; else the text. */
  body: unknown;
}

export interface HttpClient {
  send(req: OutboundRequest): Promise<OutboundResponse>;
  close(): Promise<void>;
}

/** One client per process: its connection pool is shared by every connector. */
export function httpClient(opts: { allowPrivateEgress: boolean; limits?: Partial<HttpLimits> }): HttpClient {
  const limits = { ...DEFAULT_HTTP_LIMITS, ...opts.limits };
  const agent: Dispatcher = new Agent({
    connect: { timeout: limits.connectTimeoutMs, ...(opts.allowPrivateEgress ? {} : { lookup: guardedLookup }) },
    headersTimeout: limits.headersTimeoutMs,
    bodyTimeout: limits.bodyTimeoutMs,
    maxResponseSize: limits.maxResponseBytes,
    connections: 64,
  });
  return {
    async send(req) {
      if (req.url.protocol !== 'http:' && req.url.protocol !== 'https:') throw new EgressRefused('Only http and https URLs may be called');
      if (req.url.username !== '' || req.url.password !== '')
        throw new EgressRefused('URLs with credentials are not called; give them as the connector secret');
      // An address written in the URL is not looked up: check it here.
      if (!opts.allowPrivateEgress) {
        const reason = privateHostReason(req.url.hostname);
        if (reason !== undefined) throw new EgressRefused(`${req.url.hostname} is ${reason}; set ALLOW_PRIVATE_EGRESS=true to allow it`);
      }
      let res;
      try {
        res = await request(req.url, { method: req.method as Dispatcher.HttpMethod, headers: req.headers, body: req.body, dispatcher: agent });
      } catch (err) {
        // undici wraps what our lookup threw.
        const cause = (err as { cause?: unknown }).cause;
        if (err instanceof EgressRefused) throw err;
        if (cause instanceof EgressRefused) throw cause;
        throw err;
      }
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) headers[k] = Array.isArray(v) ? v.join(', ') : v;
      const text = await res.body.text();
      let body: unknown = text;
      if (isJsonMediaType(headers['content-type']) && text !== '') {
        try {
          body = JSON.parse(text);
        } catch {
          body = text;
        }
      }
      // Kept in a run record or a connector's last_error, such text would make it unrecordable.
      if (mayHoldUnstorableText(text)) {
        const at = unstorableTextAt(body);
        if (at !== undefined)
          throw new RequestProblem(`The provider's answer (${res.statusCode}) cannot be kept: ${UNSTORABLE_TEXT} (at ${at === '' ? 'the body itself' : at})`);
      }
      return { status: res.statusCode, headers, body };
    },
    close: () => agent.close(),
  };
}
