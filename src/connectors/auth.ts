/**
 * Outbound authentication of a connector's requests, by auth_type:
 *   none; api_key (the secret in config.header_name, default X-Api-Key); bearer_token
 *   (Authorization: Bearer <secret>); basic_auth (config.username and the secret);
 *   oauth2 (client credentials: a token from config.token_url for config.client_id and the
 *   secret, cached until it expires, fetched again once when the provider answers 401);
 *   hmac (the body signed the Standard Webhooks way with the whsec_ secret, standard-webhooks.ts).
 */
import { randomUUID } from 'node:crypto';
import { baseUrlProblem } from '../egress.ts';
import { ConnectorConfigError, ProviderUnavailable } from './errors.ts';
import type { HttpClient, OutboundRequest } from './http.ts';
import { providerExcerpt, redactor } from './redact.ts';
import { signingKeyOf, standardWebhookSignature } from './standard-webhooks.ts';

export interface ConnectorRecord {
  id: string;
  auth_type: string;
  type: string | null;
  config: Record<string, unknown> | null;
  /** The opened secret, or undefined when none is set. */
  secret: string | undefined;
  updated_at: Date;
}

const str = (v: unknown) => (typeof v === 'string' && v !== '' ? v : undefined);

function needSecret(c: ConnectorRecord): string {
  if (c.secret === undefined || c.secret === '') throw new ConnectorConfigError(`The connector's auth_type ${c.auth_type} needs a secret, and none is set`);
  return c.secret;
}

const base64 = (v: string) => Buffer.from(v).toString('base64');

/** The body of an oauth2 connector's token request (form-encoded), or undefined while its settings are incomplete. */
function tokenRequestForm(c: ConnectorRecord): URLSearchParams | undefined {
  const cfg = c.config ?? {};
  const clientId = str(cfg.client_id);
  if (clientId === undefined || c.secret === undefined || c.secret === '') return undefined;
  const form = new URLSearchParams({ grant_type: 'client_credentials', client_id: clientId, client_secret: c.secret });
  const scopes = Array.isArray(cfg.scopes) ? cfg.scopes.filter((s): s is string => typeof s === 'string') : typeof cfg.scopes === 'string' ? [cfg.scopes] : [];
  if (scopes.length > 0) form.set('scope', scopes.join(' '));
  return form;
}

/**
 * Every credential value the service sends for this connector, known before a call: the
 * secret, the header values built from it, an oauth2 token request's body and its
 * client_secret member, an hmac key in its base64 forms. (An oauth2 access token is known
 * only once fetched: authorize returns it.) redact.ts adds the encodings.
 */
export function sentCredentials(c: ConnectorRecord): string[] {
  const s = c.secret;
  if (s === undefined || s === '') return [];
  const out = [s, base64(s), `Bearer ${s}`];
  const user = str(c.config?.username);
  if (user !== undefined) out.push(`${user}:${s}`, base64(`${user}:${s}`), `Basic ${base64(`${user}:${s}`)}`);
  if (c.auth_type === 'oauth2') {
    const form = tokenRequestForm(c);
    if (form) out.push(form.toString(), `client_secret=${new URLSearchParams({ s }).toString().slice(2)}`);
  }
  if (c.auth_type === 'hmac') {
    const key = signingKeyOf(s);
    if (key.length > 0) out.push(key.toString('base64'), key.toString('base64').replace(/=+$/, ''), key.toString('base64url'), key.toString('hex'));
    if (s.startsWith('whsec_')) out.push(s.slice(6));
  }
  return out;
}

interface CachedToken {
  token: string;
  expiresAt: number;
}

/** OAuth2 client-credentials tokens, per connector and its settings (a changed secret or config starts afresh). */
export interface TokenCache {
  token(c: ConnectorRecord): Promise<string>;
  forget(c: ConnectorRecord): void;
}

export function tokenCache(http: HttpClient, allowPrivateEgress: boolean, now: () => number): TokenCache {
  const tokens = new Map<string, CachedToken>();
  // Concurrent calls of one connector share one fetch.
  const inFlight = new Map<string, Promise<string>>();
  const keyOf = (c: ConnectorRecord) => `${c.id}:${c.updated_at.getTime()}`;

  const fetchToken = async (c: ConnectorRecord): Promise<string> => {
    const cfg = c.config ?? {};
    const tokenUrl = str(cfg.token_url);
    if (!tokenUrl) throw new ConnectorConfigError('An oauth2 connector needs config.token_url');
    if (!str(cfg.client_id)) throw new ConnectorConfigError('An oauth2 connector needs config.client_id');
    const problem = baseUrlProblem(tokenUrl, allowPrivateEgress);
    if (problem) throw new ConnectorConfigError(`config.token_url ${problem}`);
    needSecret(c);
    const form = tokenRequestForm(c)!;
    const res = await http.send({
      method: 'POST',
      url: new URL(tokenUrl),
      headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
      body: form.toString(),
    });
    const body = res.body as Record<string, unknown> | undefined;
    if (res.status >= 500 || res.status === 429) throw new ProviderUnavailable(`The token endpoint answered ${res.status}`);
    if (res.status !== 200 || typeof body?.access_token !== 'string') {
      // An endpoint that echoes the request quotes the client secret: only a redacted excerpt of its answer is kept.
      const said = typeof body?.error === 'string' ? body.error : res.body;
      const excerpt = said === undefined || said === '' ? '' : `: ${providerExcerpt(said, redactor(sentCredentials(c)))}`;
      throw new ConnectorConfigError(`The token endpoint refused the client credentials (${res.status})${excerpt}`);
    }
    const lifetime = typeof body.expires_in === 'number' && body.expires_in > 0 ? body.expires_in : 3600;
    // Renewed a little before it runs out, so a request never carries a token that expires on the way.
    tokens.set(keyOf(c), { token: body.access_token, expiresAt: now() + Math.max(1, lifetime - 30) * 1000 });
    return body.access_token;
  };

  return {
    async token(c) {
      const key = keyOf(c);
      const cached = tokens.get(key);
      if (cached && cached.expiresAt > now()) return cached.token;
      let p = inFlight.get(key);
      if (!p) {
        p = fetchToken(c).finally(() => inFlight.delete(key));
        inFlight.set(key, p);
      }
      return p;
    },
    forget(c) {
      tokens.delete(keyOf(c));
    },
  };
}

/**
 * The request with the connector's credentials added, and the values it sent that are not
 * known before the call (an oauth2 access token, as token and as header value), for
 * redaction. `messageId` names the request for hmac signing (none: a random one); `nowSeconds` is the runtime's clock.
 */
export async function authorize(
  c: ConnectorRecord,
  req: OutboundRequest,
  tokens: TokenCache,
  messageId: string | undefined,
  nowSeconds: number,
): Promise<{ request: OutboundRequest; sent: string[] }> {
  const cfg = c.config ?? {};
  const headers = { ...req.headers };
  const sent: string[] = [];
  switch (c.auth_type) {
    case 'none':
      break;
    case 'api_key':
      headers[(str(cfg.header_name) ?? 'X-Api-Key').toLowerCase()] = needSecret(c);
      break;
    case 'bearer_token':
      headers.authorization = `Bearer ${needSecret(c)}`;
      break;
    case 'basic_auth': {
      const user = str(cfg.username);
      if (user === undefined) throw new ConnectorConfigError('A basic_auth connector needs config.username');
      headers.authorization = `Basic ${base64(`${user}:${needSecret(c)}`)}`;
      break;
    }
    case 'oauth2': {
      const token = await tokens.token(c);
      headers.authorization = `Bearer ${token}`;
      sent.push(token, headers.authorization);
      break;
    }
    case 'hmac': {
      const body = req.body === undefined ? '' : req.body.toString();
      const id = messageId ?? randomUUID();
      headers['webhook-id'] = id;
      headers['webhook-timestamp'] = String(nowSeconds);
      headers['webhook-signature'] = standardWebhookSignature(needSecret(c), id, nowSeconds, body);
      break;
    }
    default:
      throw new ConnectorConfigError(`auth_type ${c.auth_type} cannot call out`);
  }
  return { request: { ...req, headers }, sent };
}
