/**
 * The relay: the edge a provider (Stripe, GitHub, Shopify, a Svix sender...) posts to. It
 * cannot hold a bearer token, so the relay holds one: `POST /hooks/:token` is forwarded to
 * `POST /api/v1/webhooks/:token` of the service with the raw bytes and the provider's
 * headers unchanged, plus the bearer token of the relay's one service account and
 * `Tributary-Require-Verification: true`, so the service refuses a trigger whose
 * connector does not verify the provider's signature or key (the trigger token alone is
 * not enough). The relay stores nothing: 429 and 503 go back with their Retry-After and
 * the provider's own retries redeliver; a 401 missing_credentials is answered by one new
 * exchange and one retry with the same bytes and headers (so the same delivery id).
 *
 * It is a client of the service over HTTP, like any sender: it takes the webhook surface's
 * texts and the HTTP plumbing every listener shares, and no database or domain service.
 */
import fs from 'node:fs';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { Pool } from 'undici';
import type { Config } from '../config.ts';
import { AppError } from '../errors.ts';
import { connectionOptions, registerConnectionHooks, requestsInFlight } from '../http/connections.ts';
import { toAppError } from '../http/render-error.ts';
import { REQUIRE_VERIFICATION_HEADER, renderWebhookError, WEBHOOK_PREFIX, WEBHOOK_TEXT, webhookErrorBody } from '../webhooks/surface.ts';
import { ExchangeError, tokenSource, type Exchanged, type TokenSource } from './token.ts';

export const RELAY_PATH = '/hooks/';

/** The account the relay holds; read when an exchange needs it, so a file may appear or change later. */
export type Credentials = () => { clientId: string; clientSecret: string };

/** Reads `client_id` and `client_secret` from a JSON file (bootstrap.json has that shape). */
export function credentialsFromFile(file: string): Credentials {
  return () => {
    let doc: unknown;
    try {
      doc = JSON.parse(fs.readFileSync(file, 'utf8'));
    } catch (err) {
      throw new ExchangeError(`the relay's credentials file ${file} cannot be read: ${(err as NodeJS.ErrnoException).code ?? 'not JSON'}`, true);
    }
    const { client_id: clientId, client_secret: clientSecret } = (doc ?? {}) as Record<string, unknown>;
    if (typeof clientId !== 'string' || typeof clientSecret !== 'string' || clientId === '' || clientSecret === '')
      throw new ExchangeError(`the relay's credentials file ${file} has no client_id and client_secret strings`, true);
    return { clientId, clientSecret };
  };
}

/** Headers that belong to one hop, or that the relay sets itself; every other header goes through unchanged. */
const NOT_FORWARDED = new Set([
  'host',
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'content-length',
  'expect',
  'authorization',
  REQUIRE_VERIFICATION_HEADER,
]);

/** Headers of the service's answer the provider gets back. */
const RETURNED = ['content-type', 'retry-after', 'x-request-id', 'ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset', 'ratelimit-policy'];

/** The scope the relay's token is exchanged for. */
export const RELAY_SCOPE = 'webhooks';

/**
 * A refusal of the relay's own (no delivery reached the service), in the webhook shape: a
 * token no trigger can have (past the router's length) or a path the router cannot read is
 * an unknown trigger. Neither the token nor the path is ever put in the answer.
 */
const notFound = () => new AppError('not_found', WEBHOOK_TEXT.triggerNotFound);
const HOOK_PATH_RE = /^\/hooks\/[^/?]*(?:\?.*)?$/;

/** Seconds a provider is told to wait when the relay itself cannot reach the service or get a token. */
export const RELAY_RETRY_AFTER_SECONDS = 5;

export interface RelayOptions {
  config: Config;
  log: Logger;
  /** The service: its origin (`http://host:port`); the ingestion and token paths are appended. */
  targetUrl: string;
  credentials: Credentials;
  /** For tests: the clock the token's renewal is timed by. */
  clock?: () => number;
}

export interface Relay {
  app: FastifyInstance;
  tokens: TokenSource;
  /** Readiness: false once draining. */
  readonly draining: { value: boolean };
  listen(port: number, host: string): Promise<string>;
  /** Stops accepting, lets deliveries in flight finish (within SHUTDOWN_GRACE_MS), closes the upstream pool. */
  stop(): Promise<void>;
}

function refuse(given: AppError, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  // A Content-Type the parser cannot read is what the service answers a body it cannot read: 422.
  const e = given.code === 'unsupported_media_type' ? new AppError('invalid_request', 'The Content-Type of the request cannot be read') : given;
  request.errorCode = e.code;
  if (e.headers) reply.headers(e.headers);
  if (e.retryAfter !== undefined) reply.header('retry-after', String(e.retryAfter));
  return renderWebhookError(e, request, reply);
}

const unavailable = (detail: string) =>
  new AppError('unavailable', WEBHOOK_TEXT.unavailable, { retryAfter: RELAY_RETRY_AFTER_SECONDS, cause: new Error(detail) });

function exchangeWith(pool: Pool, origin: URL, credentials: Credentials, timeoutMs: number): () => Promise<Exchanged> {
  return async () => {
    const { clientId, clientSecret } = credentials();
    let res;
    try {
      res = await pool.request({
        method: 'POST',
        path: `${origin.pathname.replace(/\/$/, '')}/api/v1/oauth/token`,
        headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
        // The one scope the relay uses: a token it holds can ingest and do nothing else, whatever else its account was granted.
        body: new URLSearchParams({ grant_type: 'client_credentials', client_id: clientId, client_secret: clientSecret, scope: RELAY_SCOPE }).toString(),
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
      });
    } catch (err) {
      throw new ExchangeError(`the token endpoint did not answer: ${(err as NodeJS.ErrnoException).code ?? (err as Error).name}`, false);
    }
    const text = await res.body.text();
    let doc: { access_token?: unknown; expires_in?: unknown; error?: unknown } = {};
    try {
      doc = JSON.parse(text) as typeof doc;
    } catch {
      // told by the status below
    }
    if (res.statusCode !== 200 || typeof doc.access_token !== 'string') {
      // The OAuth error code only: its description may repeat what was sent.
      const code = typeof doc.error === 'string' ? doc.error : 'no error code';
      throw new ExchangeError(`the token endpoint answered ${res.statusCode} (${code})`, res.statusCode === 400 || res.statusCode === 401);
    }
    const expiresIn = typeof doc.expires_in === 'number' && doc.expires_in > 0 ? doc.expires_in : 900;
    return { token: doc.access_token, expiresInSeconds: expiresIn };
  };
}

export async function createRelay(opts: RelayOptions): Promise<Relay> {
  const { config, log } = opts;
  const origin = new URL(opts.targetUrl);
  const basePath = origin.pathname.replace(/\/$/, '');
  const timeoutMs = config.relay.upstreamTimeoutMs;
  const pool = new Pool(origin.origin, { connections: config.relay.upstreamConnections, pipelining: 1, keepAliveTimeout: 30_000 });
  const tokens = tokenSource(exchangeWith(pool, origin, opts.credentials, timeoutMs), opts.clock);
  const draining = { value: false };
  const limit = config.webhookMaxBodyBytes;
  const relayLog: FastifyBaseLogger = log.child(
    { component: 'relay' },
    // The route pattern, never the URL: the path holds the trigger token.
    { serializers: { req: (req: FastifyRequest) => ({ method: req.method, route: req.routeOptions?.url ?? 'no route', remoteAddress: req.ip }) } },
  );

  const app: FastifyInstance = Fastify({
    loggerInstance: relayLog,
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: limit,
    routerOptions: { maxParamLength: 500 },
    // Fastify's own answers (414 for a long token, 400 for a bad escape) echo the path: ours do not.
    frameworkErrors: (err, request, reply) => {
      const code = (err as { code?: unknown }).code;
      const e = code === 'FST_ERR_MAX_PARAM_LENGTH' || code === 'FST_ERR_BAD_URL' ? notFound() : toAppError(err);
      return refuse(e, request, reply);
    },
    return503OnClosing: false,
    forceCloseConnections: 'idle',
    ...connectionOptions(config, () => (e) => ({ contentType: 'application/json', body: webhookErrorBody(e) })),
  });
  app.decorateRequest('errorCode', undefined);
  registerConnectionHooks(app, { config, draining });
  app.removeAllContentTypeParsers();
  // Raw bytes whatever the media type: the signature the service checks is over these bytes.
  app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: limit }, (_req, body, done) => done(null, body));
  app.addHook('onRequest', async (request) => {
    const length = request.headers['content-length'];
    if (request.method === 'POST' && length !== undefined && Number(length) > limit) throw new AppError('payload_too_large', WEBHOOK_TEXT.tooLarge);
  });
  // The relay logs its own failures where they happen (with what is safe to say of them).
  app.setErrorHandler((err, request, reply) => {
    const e = toAppError(err);
    if (e.status >= 500 && e.code !== 'unavailable') request.log.error({ err }, 'relay: request failed');
    return refuse(e, request, reply);
  });
  // Another method on a hook's path is 405 with Allow (the relay takes POST only); any other path an unknown trigger.
  app.setNotFoundHandler((request, reply) => {
    if (request.method !== 'POST' && HOOK_PATH_RE.test(request.url))
      return refuse(new AppError('method_not_allowed', 'Method not allowed', { headers: { allow: 'POST' } }), request, reply);
    return refuse(notFound(), request, reply);
  });

  app.get('/healthz', async (_request, reply) => (draining.value ? reply.code(503).send({ status: 'draining' }) : { status: 'ok' }));

  const forward = async (token: string, path: string, headers: Record<string, string | string[]>, body: Buffer) => {
    headers.authorization = `Bearer ${token}`;
    const res = await pool.request({ method: 'POST', path, headers, body, headersTimeout: timeoutMs, bodyTimeout: timeoutMs });
    return { status: res.statusCode, headers: res.headers, body: Buffer.from(await res.body.arrayBuffer()) };
  };

  app.post('/hooks/:token', async (request: FastifyRequest, reply: FastifyReply) => {
    const trigger = (request.params as { token: string }).token;
    const body = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
    const headers: Record<string, string | string[]> = {};
    for (const [name, value] of Object.entries(request.headers)) if (value !== undefined && !NOT_FORWARDED.has(name)) headers[name] = value;
    headers[REQUIRE_VERIFICATION_HEADER] = 'true';
    headers['x-forwarded-for'] = request.ip;
    const path = `${basePath}${WEBHOOK_PREFIX}${encodeURIComponent(trigger)}`;

    let bearer: string;
    try {
      bearer = await tokens.get();
    } catch (err) {
      relayLog.error({ reason: (err as Error).message }, 'relay: no bearer token; deliveries are answered 503 until an exchange succeeds');
      throw unavailable('no bearer token');
    }
    let answer;
    try {
      answer = await forward(bearer, path, headers, body);
      if (answer.status === 401 && isMissingCredentials(answer.body)) {
        // The token ran out or was revoked: one exchange (shared), then one retry with the same headers, so the same delivery id.
        try {
          bearer = await tokens.renew(bearer);
        } catch (err) {
          relayLog.error({ reason: (err as Error).message }, 'relay: the token was refused and no new one could be exchanged');
          throw unavailable('no bearer token');
        }
        answer = await forward(bearer, path, headers, body);
        if (answer.status === 401 && isMissingCredentials(answer.body)) {
          relayLog.error("relay: the service refuses a freshly exchanged token; check the relay's service account");
          throw unavailable('token refused');
        }
      }
    } catch (err) {
      if (err instanceof AppError) throw err;
      relayLog.warn({ reason: (err as NodeJS.ErrnoException).code ?? (err as Error).name }, 'relay: the service did not answer');
      throw unavailable('service did not answer');
    }
    reply.code(answer.status);
    for (const name of RETURNED) {
      const value = answer.headers[name];
      if (value !== undefined) reply.header(name, value);
    }
    return reply.send(answer.body);
  });
  await app.ready();

  let stopped: Promise<void> | undefined;
  return {
    app,
    tokens,
    draining,
    listen: (port, host) => app.listen({ port, host }),
    stop: () =>
      (stopped ??= (async () => {
        draining.value = true;
        const timer = setTimeout(() => {
          for (const request of requestsInFlight(app))
            request.log.warn({ route: request.routeOptions.url ?? 'no route' }, 'relay: delivery cut off at shutdown');
          app.server.closeAllConnections?.();
        }, config.shutdownGraceMs);
        await app.close();
        clearTimeout(timer);
        await pool.close();
      })()),
  };
}

function isMissingCredentials(body: Buffer): boolean {
  if (body.length > 4096) return false;
  try {
    return (JSON.parse(body.toString('utf8')) as { error?: unknown }).error === WEBHOOK_TEXT.missingCredentials;
  } catch {
    return false;
  }
}

/**
 * The account of `tributary relay`: RELAY_CLIENT_ID and RELAY_CLIENT_SECRET, or
 * RELAY_CREDENTIALS_FILE; inside `serve`, the bootstrap account (DATA_DIR/bootstrap.json)
 * when neither is given.
 */
export function relayCredentials(config: Config, fallbackFile: string | undefined): Credentials | undefined {
  const { clientId, clientSecret, credentialsFile } = config.relay;
  if (clientId !== undefined && clientSecret !== undefined) return () => ({ clientId, clientSecret });
  const file = credentialsFile ?? fallbackFile;
  return file === undefined ? undefined : credentialsFromFile(file);
}
