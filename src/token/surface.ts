/**
 * POST /api/v1/oauth/token: the client-credentials grant (RFC 6749 4.4) with client
 * authentication by body members (client_secret_post) or HTTP Basic (2.3.1). Failures use
 * RFC 6749 5.2 bodies, not JSON:API documents, so stock OAuth clients understand them.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { epochSeconds, type Deps } from '../deps.ts';
import { AppError } from '../errors.ts';
import type { RenderError } from '../http/render-error.ts';
import type { SurfaceSpec } from '../http/surface.ts';
import { looksLikeSecret, matchesHash } from '../secrets.ts';
import { loadAccountByClientId } from '../auth/auth.sql.ts';
import { accountStanding } from '../auth/principal.ts';
import { isScope, signToken, type Scope } from '../auth/tokens.ts';

/** The RFC 6749 5.2 error codes that are AppError codes of their own; the rest are told by status. */
const OAUTH_CODES: ReadonlySet<string> = new Set(['invalid_request', 'invalid_client', 'unsupported_grant_type', 'invalid_scope']);

/**
 * The token surface's errors, as RFC 6749 5.2 bodies. RFC 6749 5.2: a request the token
 * endpoint cannot read is 400 invalid_request, whatever status another surface gives the
 * same fault (a too-deep JSON body is 422 elsewhere).
 */
export const renderOAuthError: RenderError = (e, request, reply) => {
  const error = OAUTH_CODES.has(e.code)
    ? e.code
    : e.status === 429 || e.status === 503
      ? 'temporarily_unavailable'
      : e.status >= 500
        ? 'server_error'
        : 'invalid_request';
  request.errorCode = error;
  reply.header('cache-control', 'no-store').header('pragma', 'no-cache');
  return reply
    .code(e.code === 'invalid_request' ? 400 : e.status)
    .type('application/json')
    .send(JSON.stringify({ error, error_description: e.detail }));
};

const invalidRequest = (detail: string) => new AppError('invalid_request', detail);
/** With Basic, a client that failed authentication is told how to authenticate (RFC 6749 5.2). */
const invalidClient = (detail: string, basic = false) =>
  new AppError('invalid_client', detail, basic ? { headers: { 'www-authenticate': 'Basic realm="tributary", charset="UTF-8"' } } : {});

/** RFC 6749 2.3.1: both parts are form-urlencoded before being joined with a colon. */
function parseBasic(header: string): { id: string; secret: string } | undefined {
  const m = /^Basic ([A-Za-z0-9+/=]+)$/i.exec(header.trim());
  if (!m) return undefined;
  const decoded = Buffer.from(m[1]!, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0) return undefined;
  try {
    return { id: decodeURIComponent(decoded.slice(0, colon).replace(/\+/g, ' ')), secret: decodeURIComponent(decoded.slice(colon + 1).replace(/\+/g, ' ')) };
  } catch {
    return undefined;
  }
}

function member(body: Record<string, unknown>, name: string): string | undefined | null {
  const v = body[name];
  if (v === undefined) return undefined;
  // A repeated or non-string member is malformed (RFC 6749 3.1: parameters must not repeat).
  return typeof v === 'string' ? v : null;
}

const CREDENTIAL_PARAMS = new Set(['client_id', 'client_secret', 'access_token', 'password']);

/** Whether the query string names a credential parameter or carries a secret-shaped value. */
function credentialsInQuery(url: string): boolean {
  const q = url.indexOf('?');
  if (q < 0) return false;
  const query = url.slice(q + 1);
  if (looksLikeSecret(query)) return true;
  for (const name of new URLSearchParams(query).keys()) if (CREDENTIAL_PARAMS.has(name.toLowerCase())) return true;
  return false;
}

/** The token surface: POST /api/v1/oauth/token; client authentication is the handler's own. */
export function tokenSurface(deps: Deps): SurfaceSpec {
  return {
    render: renderOAuthError,
    setup(scope) {
      scope.post('/api/v1/oauth/token', { bodyLimit: 16 * 1024 }, (request, reply) => exchange(deps, request, reply));
    },
  };
}

async function exchange(deps: Deps, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  // Per client address, before any lookup: bounds credential guessing and exchange floods.
  const { max, windowSeconds } = deps.config.tokenRateLimit;
  const window = await deps.limiter.hit(`token:${request.ip}`, max, windowSeconds);
  if (!window.allowed) {
    throw new AppError('rate_limited', 'Too many token requests; retry after the indicated time', { retryAfter: window.resetSeconds });
  }
  // RFC 6749 2.3.1: credentials never travel in the URL, where proxies and logs keep them.
  if (credentialsInQuery(request.url)) {
    throw invalidRequest('Credentials must not be sent in the query string; send them in the request body or with HTTP Basic');
  }
  const ct = (request.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
  if (ct !== 'application/json' && ct !== 'application/x-www-form-urlencoded') {
    throw invalidRequest('The body must be application/x-www-form-urlencoded or application/json');
  }
  const body = request.body;
  if (!body || typeof body !== 'object' || Array.isArray(body)) throw invalidRequest('The body must be an object of parameters');
  const params = body as Record<string, unknown>;
  const names = ['grant_type', 'client_id', 'client_secret', 'scope'] as const;
  const values: Partial<Record<(typeof names)[number], string>> = {};
  for (const n of names) {
    const v = member(params, n);
    if (v === null) throw invalidRequest(`The ${n} parameter is malformed or repeated`);
    if (v !== undefined) values[n] = v;
  }
  const authHeader = request.headers.authorization;
  const usesBasic = authHeader !== undefined && /^Basic /i.test(authHeader);
  if (values.grant_type === undefined) throw invalidRequest('grant_type is required');
  if (values.grant_type !== 'client_credentials') throw new AppError('unsupported_grant_type', 'Only the client_credentials grant is supported');

  let clientId: string | undefined;
  let secret: string | undefined;
  if (usesBasic) {
    const basic = parseBasic(authHeader!);
    if (!basic) throw invalidClient('The Basic credentials are malformed', true);
    // RFC 6749 2.3: a client must not use more than one authentication method.
    if (values.client_secret !== undefined) throw invalidRequest('Use either HTTP Basic or body credentials, not both');
    if (values.client_id !== undefined && values.client_id !== basic.id) throw invalidRequest('client_id does not match the Basic credentials');
    clientId = basic.id;
    secret = basic.secret;
  } else {
    clientId = values.client_id;
    secret = values.client_secret;
    if (clientId === undefined || secret === undefined) throw invalidClient('Client authentication is required');
  }

  const account = clientId.length <= 128 ? await loadAccountByClientId(deps.db, clientId) : undefined;
  // One answer for every failure, so the response does not tell which part was wrong.
  if (!account || !matchesHash(secret, account.secret_hash) || accountStanding(account) !== 'active') {
    throw invalidClient('Client authentication failed', usesBasic);
  }

  let scopes = account.scopes.filter(isScope);
  if (values.scope !== undefined && values.scope.trim() !== '') {
    const requested = [...new Set(values.scope.trim().split(/ +/))];
    if (!requested.every((s) => isScope(s) && account.scopes.includes(s))) {
      throw new AppError('invalid_scope', 'The requested scope exceeds the scopes granted to this client');
    }
    scopes = requested as Scope[];
  }
  const ttl = deps.config.tokenTtlSeconds;
  const accessToken = signToken(deps.signingKey, {
    sub: account.id,
    org: account.organization_id,
    ws: account.workspace_id,
    scp: scopes,
    exp: epochSeconds(deps.clock) + ttl,
    iat: deps.clock(),
  });
  return reply
    .header('cache-control', 'no-store')
    .header('pragma', 'no-cache')
    .type('application/json')
    .send({ access_token: accessToken, token_type: 'bearer', expires_in: ttl, scope: scopes.join(' ') });
}
