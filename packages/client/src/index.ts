/**
 * @tributary/client: a typed client of the Tributary API as one service account.
 * Token exchange and renewal, one re-exchange on 401, Retry-After and backoff on 429/503 with
 * the same Idempotency-Key on every retry, pages as async iterators, GraphQL factQuery and
 * factAggregate, every fact of a query as an async iterator, and webhook sending. The secret and the tokens never appear in an error message.
 */
import { uuidV4 } from './uuid.ts';
import { TributaryError, errorFromAnswer } from './errors.ts';
import { withRetries, type RetryPolicy } from './retry.ts';
import { tokenSource, type TokenSource } from './token.ts';
import { factPages, type Fact, type FactQueryCall } from './facts.ts';
import {
  API_PREFIX,
  type BulkReplayDocument,
  type BulkReplayMeta,
  type Collection,
  type CreateData,
  type Creatable,
  type Deletable,
  type FactAggregate,
  type FactAggregateVariables,
  type FactExportVariables,
  type FactQueryVariables,
  type ListOptions,
  type One,
  type Page,
  type ReplayVersion,
  type ResourceOf,
  type TestRunAttributes,
  type TestRunDocument,
  type TokenAnswer,
  type Updatable,
  type UpdateData,
  type WebhookAccepted,
} from './types.ts';

export { TributaryError, type ErrorSource } from './errors.ts';
export { retryAfterMs, backoffMs, type RetryPolicy } from './retry.ts';
export type * from './types.ts';
export { MAX_PAGE_SIZE as FACT_PAGE_MAX, type Fact } from './facts.ts';

export const TOKEN_PATH = '/api/v1/oauth/token';
export const GRAPHQL_PATH = '/api/graphql';
export const WEBHOOK_PATH = '/api/v1/webhooks';
const JSONAPI = 'application/vnd.api+json';

export interface ClientOptions {
  /** Where the server is: `https://tributary.example.com` (no path). */
  baseUrl: string;
  clientId: string;
  clientSecret: string;
  /** Space-separated scopes to ask for (default: all of the account's). */
  scope?: string;
  /** A fetch of your own (a proxy, a test double); default globalThis.fetch. */
  fetch?: typeof fetch;
  /** Attempts of one call on 429/503 or no answer, the first included (default 5). */
  maxAttempts?: number;
  /** Time one call may spend in all, waits included (default 60 000 ms). */
  maxElapsedMs?: number;
  /** First backoff ceiling when the server gives no Retry-After (default 500 ms, doubling up to 30 s). */
  baseDelayMs?: number;
  /**
   * Time one attempt may wait for the server's answer (default 0: no limit). An attempt that
   * times out is retried like one that got no answer; the last one fails with code `timeout`.
   */
  timeoutMs?: number;
  /**
   * Turns every TributaryError a call would reject with into an error of your own (your
   * program's messages, say); your own abort and anything else are passed unchanged.
   */
  mapError?: (err: TributaryError) => Error;
  /** For tests: the clock (ms), the wait between attempts and the jitter's random source. */
  clock?: () => number;
  sleep?: (ms: number) => Promise<void>;
  random?: () => number;
}

export interface CallOptions {
  /** Idempotency-Key of an unsafe call; one is made per call when not given, and sent on every retry. */
  idempotencyKey?: string;
  signal?: AbortSignal;
  /** This call's attempt time limit instead of the client's timeoutMs; 0 for none (a long test run). */
  timeoutMs?: number;
}

export interface WebhookOptions {
  /** The delivery's identity, sent as Idempotency-Key on every attempt; a UUID per call when not given. */
  deliveryId?: string;
  headers?: Record<string, string>;
  signal?: AbortSignal;
}

export interface GraphqlAnswer<T> {
  data: T;
}

export interface FactPage {
  hasNextPage: boolean;
  hasPreviousPage: boolean;
  pageNumber: number;
  lastPage: number;
  limit: number;
  count: number | null;
  results: Array<{ id: string; dataModelId: string; entityId: string | null; observedAt: string; data: string; insertedAt: string }> | null;
}

export interface TributaryClient {
  /** One page of a collection. */
  list<C extends Collection>(collection: C, opts?: ListOptions<C>): Promise<Page<C>>;
  /** Every resource of a collection, page after page, following links.next. */
  iterate<C extends Collection>(collection: C, opts?: ListOptions<C>): AsyncIterableIterator<ResourceOf<C>>;
  get<C extends Collection>(collection: C, id: string, opts?: Pick<ListOptions<C>, 'include' | 'fields'>): Promise<One<C>>;
  create<C extends Creatable>(collection: C, data: CreateData<C>, opts?: CallOptions): Promise<One<C>>;
  update<C extends Updatable>(collection: C, id: string, data: UpdateData<C>, opts?: CallOptions): Promise<One<C>>;
  /** DELETE /{collection}/{id} (204). A retry of the call (429, 503) replays the 204 under the call's one Idempotency-Key. */
  delete<C extends Deletable>(collection: C, id: string, opts?: CallOptions): Promise<void>;
  /**
   * Runs a workflow on a sample payload without storing anything (POST /workflows/{id}/test_run);
   * `attributes.workflow_file` tests that unsaved file instead of a saved version, and a null
   * workflowId tests the file of a workflow not saved yet (POST /workflows/test_run).
   */
  testRun(workflowId: string | null, attributes: TestRunAttributes, opts?: CallOptions): Promise<TestRunDocument>;
  /** A new run of a run's payload, on the version it ran (`original`) or the workflow's `current` one. */
  replay(runId: string, version?: ReplayVersion, opts?: CallOptions): Promise<One<'workflow_runs'>>;
  /** Cancels a queued, retrying or waiting run (POST /workflow_runs/{id}/cancel): 409 when it is running or finished. */
  cancelRun(runId: string, opts?: CallOptions): Promise<One<'workflow_runs'>>;
  /** Replays the runs a filter selects (POST /workflow_runs/replay). */
  bulkReplay(filter: ListOptions<'workflow_runs'>['filter'], meta?: BulkReplayMeta, opts?: CallOptions): Promise<BulkReplayDocument>;
  /** Checks a connector's credentials against its provider (POST /external_connectors/{id}/verify). */
  verifyConnector(connectorId: string, opts?: CallOptions): Promise<One<'external_connectors'>>;
  /** A connector's rate budget and its use in the current window, read without counting (GET /external_connectors/{id}/rate_limit). */
  connectorRateLimit(connectorId: string): Promise<import('./types.ts').ConnectorRateLimitDocument>;
  /** A GraphQL query of facts; its variables are factQuery's arguments. Resolves to `data`. */
  factQuery<T = { factQuery: FactPage | null }>(query: string, variables: FactQueryVariables): Promise<T>;
  /** A GraphQL query of factAggregate; its variables are factAggregate's arguments. Resolves to `data`. */
  factAggregate<T = { factAggregate: FactAggregate | null }>(query: string, variables: FactAggregateVariables): Promise<T>;
  /**
   * Every fact factQuery matches, page after page (at most `pageSize`, default 250, each),
   * oldest first on the time axis (latest mode: by observedAt), at any depth at the cost of
   * the first page. A timeline without `since` starts at the model's earliest fact and, without
   * `until`, ends when the iteration starts; longer than factQuery's 366 days, it is read
   * window after window.
   */
  factPages(variables: FactExportVariables): AsyncIterableIterator<Fact[]>;
  /** The facts of factPages, one by one. */
  facts(variables: FactExportVariables): AsyncIterableIterator<Fact>;
  /** Delivers a payload to a workflow trigger as this account (POST /api/v1/webhooks/{token}). */
  sendWebhook(triggerToken: string, body: unknown, opts?: WebhookOptions): Promise<WebhookAccepted & { deliveryId: string }>;
  /** Raw JSON:API call under /api/json/v1 with the client's token and retry rules. */
  request(method: string, path: string, body?: unknown, opts?: CallOptions): Promise<unknown>;
  /** Token exchanges started so far (for monitoring; concurrent callers share one). */
  readonly exchanges: number;
}

const UNSAFE = new Set(['POST', 'PATCH', 'PUT', 'DELETE']);

function list(value: string | readonly string[]): string {
  return typeof value === 'string' ? value : value.join(',');
}

/** filter/sort/include/fields/page as the JSON:API query string. */
export function queryString(opts: ListOptions<Collection> = {}): string {
  const q = new URLSearchParams();
  for (const [field, cond] of Object.entries(opts.filter ?? {})) {
    if (cond === undefined) continue;
    if (cond !== null && typeof cond === 'object' && !Array.isArray(cond)) {
      for (const [op, v] of Object.entries(cond as Record<string, unknown>)) if (v !== undefined) q.append(`filter[${field}][${op}]`, scalar(v));
    } else q.append(`filter[${field}]`, scalar(cond));
  }
  if (opts.sort !== undefined) q.append('sort', list(opts.sort));
  if (opts.include !== undefined) q.append('include', list(opts.include));
  for (const [type, names] of Object.entries(opts.fields ?? {})) q.append(`fields[${type}]`, list(names));
  for (const [k, v] of Object.entries(opts.page ?? {})) q.append(`page[${k}]`, String(v));
  const s = q.toString();
  return s === '' ? '' : `?${s}`;
}

function scalar(v: unknown): string {
  return Array.isArray(v) ? v.map(String).join(',') : String(v);
}

const sleeper = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** An attempt that outlived its time limit: no answer, retried as such (not the caller's own abort). */
class AttemptTimeout extends Error {
  readonly ms: number;
  constructor(ms: number) {
    super(`no answer within ${ms} ms`);
    this.name = 'AttemptTimeout';
    this.ms = ms;
  }
}

/** What one call is, besides its request: how long an attempt may take, and whether it is the token exchange. */
interface CallShape {
  timeoutMs: number;
  tokenExchange?: boolean;
}

export function createClient(options: ClientOptions): TributaryClient {
  const base = options.baseUrl.replace(/\/+$/, '');
  const doFetch = options.fetch ?? globalThis.fetch;
  const clock = options.clock ?? Date.now;
  const policy: RetryPolicy = {
    maxAttempts: Math.max(1, options.maxAttempts ?? 5),
    maxElapsedMs: options.maxElapsedMs ?? 60_000,
    baseDelayMs: options.baseDelayMs ?? 500,
    capDelayMs: 30_000,
    clock,
    sleep: options.sleep ?? sleeper,
    random: options.random ?? Math.random,
  };

  const timeoutMs = Math.max(0, options.timeoutMs ?? 0);

  /**
   * `fn` whose failure is given to options.mapError. Every call that reaches the network goes
   * through exactly one of the guarded three (request, graphql, sendWebhook): a call is
   * mapped once, and a new call needs no line of its own.
   */
  const mapError = options.mapError;
  const guarded = <A extends unknown[], R>(fn: (...args: A) => Promise<R>): ((...args: A) => Promise<R>) =>
    mapError === undefined
      ? fn
      : async (...args) => {
          try {
            return await fn(...args);
          } catch (err) {
            throw err instanceof TributaryError ? mapError(err) : err;
          }
        };

  /** One attempt, within its time limit when it has one. */
  const attempt = async (url: string, init: RequestInit, ms: number): Promise<Response> => {
    if (ms <= 0) return doFetch(url, init);
    const timer = AbortSignal.timeout(ms);
    const signal = init.signal ? AbortSignal.any([init.signal, timer]) : timer;
    try {
      return await doFetch(url, { ...init, signal });
    } catch (err) {
      if (timer.aborted && !init.signal?.aborted) throw new AttemptTimeout(ms);
      throw err;
    }
  };

  /** One call with the retry rules; a failed final answer becomes a TributaryError. */
  const call = async (url: string, init: RequestInit, shape: CallShape): Promise<{ response: Response; attempts: number }> => {
    const out = await withRetries(policy, () => attempt(url, init, shape.timeoutMs));
    if (!out.response) {
      const timedOut = out.error instanceof AttemptTimeout;
      const reason = out.error instanceof Error ? out.error.message : String(out.error);
      throw new TributaryError({
        status: 0,
        code: timedOut ? 'timeout' : 'no_answer',
        detail: `${new URL(url).origin}: ${reason}`,
        attempts: out.attempts,
        tokenExchange: shape.tokenExchange,
        cause: out.error,
      });
    }
    return { response: out.response, attempts: out.attempts };
  };

  const failure = async (response: Response, attempts: number, tokenExchange = false): Promise<TributaryError> =>
    errorFromAnswer(response.status, await response.text(), response.headers.get('x-request-id') ?? undefined, attempts, tokenExchange);

  /** The JSON of a 2xx answer; anything else there is the server's fault, said as such. */
  const json = async (response: Response, tokenExchange = false): Promise<unknown> => {
    const text = await response.text();
    if (text === '') return null;
    try {
      return JSON.parse(text) as unknown;
    } catch {
      throw new TributaryError({
        status: response.status,
        code: 'bad_response',
        detail: 'the answer is not JSON',
        requestId: response.headers.get('x-request-id') ?? undefined,
        tokenExchange,
      });
    }
  };

  const tokens: TokenSource = tokenSource(async () => {
    const form: Record<string, string> = { grant_type: 'client_credentials', client_id: options.clientId, client_secret: options.clientSecret };
    if (options.scope !== undefined) form.scope = options.scope;
    const { response, attempts } = await call(
      `${base}${TOKEN_PATH}`,
      {
        method: 'POST',
        headers: { accept: 'application/json', 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams(form).toString(),
      },
      { timeoutMs, tokenExchange: true },
    );
    if (response.status !== 200) throw await failure(response, attempts, true);
    const doc = ((await json(response, true)) ?? {}) as Partial<TokenAnswer>;
    if (typeof doc.access_token !== 'string' || typeof doc.expires_in !== 'number')
      throw new TributaryError({ status: 200, code: 'bad_response', detail: 'the token answer has no access_token and expires_in', tokenExchange: true });
    return { token: doc.access_token, expiresInSeconds: doc.expires_in };
  }, clock);

  /**
   * An authenticated call: the token, the retry rules, and on 401 (when `renewOn401` says the
   * answer means a stale token) one re-exchange and one more try, with the same headers otherwise.
   */
  const authed = async (
    url: string,
    init: RequestInit & { headers: Record<string, string> },
    renewOn401: (body: string) => boolean,
    shape: CallShape = { timeoutMs },
  ) => {
    let token = await tokens.get();
    let { response, attempts } = await call(url, { ...init, headers: { ...init.headers, authorization: `Bearer ${token}` } }, shape);
    if (response.status === 401) {
      const text = await response.text();
      if (!renewOn401(text)) throw errorFromAnswer(401, text, response.headers.get('x-request-id') ?? undefined, attempts);
      token = await tokens.renew(token);
      const again = await call(url, { ...init, headers: { ...init.headers, authorization: `Bearer ${token}` } }, shape);
      response = again.response;
      attempts += again.attempts;
    }
    return { response, attempts };
  };

  const request = guarded(async (method: string, path: string, body?: unknown, opts: CallOptions = {}): Promise<unknown> => {
    const headers: Record<string, string> = { accept: JSONAPI };
    if (body !== undefined) headers['content-type'] = JSONAPI;
    if (UNSAFE.has(method)) headers['idempotency-key'] = opts.idempotencyKey ?? uuidV4();
    const url = path.startsWith('/api/') ? `${base}${path}` : `${base}${API_PREFIX}${path}`;
    const init = { method, headers, body: body === undefined ? undefined : JSON.stringify(body), signal: opts.signal };
    const { response, attempts } = await authed(url, init, () => true, { timeoutMs: Math.max(0, opts.timeoutMs ?? timeoutMs) });
    if (!response.ok) throw await failure(response, attempts);
    return json(response);
  });

  const page = async <C extends Collection>(url: string): Promise<Page<C>> => {
    const doc = (await request('GET', url)) as {
      data: ResourceOf<C>[];
      included?: Page<C>['included'];
      meta?: Record<string, unknown>;
      links?: Page<C>['links'];
    };
    const links = doc.links ?? {};
    // The next page is asked of our own server, whatever host the link names: the token goes nowhere else.
    const link = typeof links.next === 'string' && links.next !== '' ? new URL(links.next, `${base}/`) : undefined;
    const next = link && `${link.pathname}${link.search}`;
    return {
      data: doc.data,
      included: doc.included ?? [],
      meta: doc.meta ?? {},
      links,
      next: async () => (next === undefined ? undefined : page<C>(next)),
    };
  };

  /** A GraphQL query; filter clauses given as arrays are sent as the JSON text the API takes. Resolves to `data`. */
  const graphql = guarded(async <T>(query: string, variables: FactQueryVariables | FactAggregateVariables | Record<string, unknown>): Promise<T> => {
    const vars: Record<string, unknown> = { ...variables };
    for (const k of ['filters', 'joinFilters'] as const) if (Array.isArray(vars[k])) vars[k] = JSON.stringify(vars[k]);
    const { response, attempts } = await authed(
      `${base}${GRAPHQL_PATH}`,
      { method: 'POST', headers: { accept: 'application/json', 'content-type': 'application/json' }, body: JSON.stringify({ query, variables: vars }) },
      () => true,
    );
    const text = await response.text();
    const requestId = response.headers.get('x-request-id') ?? undefined;
    let doc: { data?: T | null; errors?: unknown[] };
    try {
      doc = JSON.parse(text) as typeof doc;
    } catch {
      throw errorFromAnswer(response.status, text, requestId, attempts);
    }
    // GraphQL answers a request error with 200 and errors, no data (docs/graphql.md).
    if (!response.ok || (Array.isArray(doc.errors) && doc.errors.length > 0)) throw errorFromAnswer(response.status, text, requestId, attempts);
    return doc.data as T;
  });

  const client: TributaryClient = {
    list: (collection, opts) => page(`${API_PREFIX}/${collection}${queryString(opts as ListOptions<Collection>)}`),
    async *iterate(collection, opts) {
      let p: Page<typeof collection> | undefined = await client.list(collection, opts);
      while (p) {
        yield* p.data;
        p = await p.next();
      }
    },
    get: async (collection, id, opts) =>
      (await request('GET', `/${collection}/${encodeURIComponent(id)}${queryString((opts ?? {}) as ListOptions<Collection>)}`)) as One<typeof collection>,
    create: async (collection, data, opts) => (await request('POST', `/${collection}`, { data }, opts)) as One<typeof collection>,
    update: async (collection, id, data, opts) =>
      (await request('PATCH', `/${collection}/${encodeURIComponent(id)}`, { data: { ...data, id } }, opts)) as One<typeof collection>,
    delete: async (collection, id, opts) => {
      await request('DELETE', `/${collection}/${encodeURIComponent(id)}`, undefined, opts);
    },
    testRun: async (workflowId, attributes, opts) =>
      (await request(
        'POST',
        workflowId === null ? '/workflows/test_run' : `/workflows/${encodeURIComponent(workflowId)}/test_run`,
        { data: { type: 'workflow_test_run', attributes } },
        opts,
      )) as TestRunDocument,
    replay: async (runId, version = 'original', opts) =>
      (await request('POST', `/workflow_runs/${encodeURIComponent(runId)}/replay`, { meta: { version } }, opts)) as One<'workflow_runs'>,
    cancelRun: async (runId, opts) => (await request('POST', `/workflow_runs/${encodeURIComponent(runId)}/cancel`, undefined, opts)) as One<'workflow_runs'>,
    bulkReplay: async (filter, meta = {}, opts) =>
      (await request('POST', `/workflow_runs/replay${queryString({ filter } as ListOptions<Collection>)}`, { meta }, opts)) as BulkReplayDocument,
    verifyConnector: async (connectorId, opts) =>
      (await request('POST', `/external_connectors/${encodeURIComponent(connectorId)}/verify`, undefined, opts)) as One<'external_connectors'>,
    connectorRateLimit: async (connectorId) =>
      (await request('GET', `/external_connectors/${encodeURIComponent(connectorId)}/rate_limit`)) as import('./types.ts').ConnectorRateLimitDocument,

    factQuery: graphql as TributaryClient['factQuery'],
    factAggregate: graphql as TributaryClient['factAggregate'],
    factPages: (variables) => factPages(graphql as FactQueryCall, variables, clock),
    async *facts(variables) {
      for await (const page of client.factPages(variables)) yield* page;
    },

    sendWebhook: guarded(async (triggerToken: string, body: unknown, opts: WebhookOptions = {}) => {
      const deliveryId = opts.deliveryId ?? uuidV4();
      const headers = { ...opts.headers, accept: 'application/json', 'content-type': 'application/json', 'idempotency-key': deliveryId };
      const { response, attempts } = await authed(
        `${base}${WEBHOOK_PATH}/${encodeURIComponent(triggerToken)}`,
        { method: 'POST', headers, body: typeof body === 'string' ? body : JSON.stringify(body), signal: opts.signal },
        // Only an expired or revoked token is worth one re-exchange; `Unauthorized` is the account or the signature.
        (text) => text.includes('missing_credentials'),
      );
      if (response.status !== 202) throw await failure(response, attempts);
      return { ...((await json(response)) as WebhookAccepted), deliveryId };
    }),

    request,
    get exchanges() {
      return tokens.exchanges;
    },
  };
  return client;
}
