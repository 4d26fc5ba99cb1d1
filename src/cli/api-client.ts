/**
 * The CLI's client of the JSON:API (/api/json/v1), as a service account: its client
 * credentials are exchanged at POST /api/v1/oauth/token for a bearer token, renewed before
 * it expires and exchanged again once when the server answers 401. Errors are the admin
 * client's AdminApiError, so reportFailure prints them the same way. Neither the secret
 * nor a token is ever printed or put in an error message.
 */
import fs from 'node:fs';
import type { Command } from 'commander';
import { loadCliConfig, type CliConfig } from '../config.ts';
import { tokenSource, type TokenSource } from '../relay/token.ts';
import { AdminApiError, DEFAULT_TIMEOUT_MS, errorFromBody, resolveServerUrl, send, UsageError } from './admin-client.ts';

export const API_PREFIX = '/api/json/v1';
export const TOKEN_PATH = '/api/v1/oauth/token';
export const JSONAPI_MEDIA_TYPE = 'application/vnd.api+json';

/** One resource object of a JSON:API document. */
export interface Resource {
  type: string;
  id: string;
  attributes: Record<string, unknown>;
  relationships?: Record<string, unknown>;
}

export interface JsonApiDocument {
  data: unknown;
  meta?: Record<string, unknown>;
  links?: Record<string, unknown>;
  included?: Resource[];
}

export interface ClientCredentials {
  clientId: string;
  clientSecret: string;
  /** Where they came from, for messages: "TRIBUTARY_CLIENT_ID" or the file's path. */
  source: string;
}

export interface ApiClientOptions {
  url?: string | undefined;
  /** --credentials FILE: a JSON file with client_id and client_secret (bootstrap.json has that shape). */
  credentialsFile?: string | undefined;
}

export interface ApiSettings {
  url: string;
  credentials: ClientCredentials;
}

/** Who the credentials are: the service account (credential) id and its organization. */
export interface Identity {
  clientId: string;
  credentialId: string;
  organizationId: string;
}

export interface ApiClient {
  readonly url: string;
  /** A 2xx answer's document; any other answer becomes an AdminApiError. `path` is under /api/json/v1. */
  request(method: 'GET' | 'POST' | 'PATCH' | 'DELETE', path: string, body?: unknown, opts?: { timeoutMs?: number }): Promise<JsonApiDocument>;
  get(path: string): Promise<JsonApiDocument>;
  post(path: string, body: unknown): Promise<JsonApiDocument>;
  patch(path: string, body: unknown): Promise<JsonApiDocument>;
  /** Every resource of a list, following links.next (at most `max`). */
  all(path: string, max?: number): Promise<Resource[]>;
  /** The credentials' own service account and organization, read once. */
  identity(): Promise<Identity>;
}

/** Reads client_id and client_secret from a JSON file; says which file and what is wrong, never its contents. */
export function readCredentialsFile(file: string): ClientCredentials {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? 'no such file' : code === 'EACCES' ? 'permission denied' : (code ?? 'unreadable');
    throw new UsageError(
      `no client credentials: cannot read ${file} (${why}); pass --credentials FILE, set TRIBUTARY_CLIENT_ID and TRIBUTARY_CLIENT_SECRET, or run where DATA_DIR/bootstrap.json is readable`,
    );
  }
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    throw new UsageError(`the credentials file ${file} is not JSON`);
  }
  const { client_id: clientId, client_secret: clientSecret } = (doc && typeof doc === 'object' ? doc : {}) as Record<string, unknown>;
  if (typeof clientId !== 'string' || typeof clientSecret !== 'string' || clientId === '' || clientSecret === '')
    throw new UsageError(`the credentials file ${file} has no client_id and client_secret strings`);
  return { clientId, clientSecret, source: file };
}

/**
 * The server and the account: --url / --credentials when given, otherwise TRIBUTARY_URL (or
 * http://127.0.0.1:$PORT) and TRIBUTARY_CLIENT_ID + TRIBUTARY_CLIENT_SECRET, or
 * TRIBUTARY_CREDENTIALS_FILE, or DATA_DIR/bootstrap.json.
 */
export function resolveApiSettings(opts: ApiClientOptions, load: () => CliConfig = loadCliConfig): ApiSettings {
  let config: CliConfig | undefined;
  const cfg = () => (config ??= load());
  const url = resolveServerUrl(opts.url, cfg);
  if (opts.credentialsFile !== undefined) return { url, credentials: readCredentialsFile(opts.credentialsFile) };
  const c = cfg();
  if (c.clientId !== undefined && c.clientSecret !== undefined) {
    return { url, credentials: { clientId: c.clientId, clientSecret: c.clientSecret, source: 'TRIBUTARY_CLIENT_ID' } };
  }
  return { url, credentials: readCredentialsFile(c.credentialsFile) };
}

/** The OAuth error of a refused exchange (RFC 6749 5.2), as the CLI's error. */
function exchangeError(status: number, text: string, credentials: ClientCredentials): AdminApiError {
  let code = 'http_error';
  try {
    const doc = JSON.parse(text) as { error?: unknown; errors?: unknown };
    if (typeof doc.error === 'string') code = doc.error;
    else if (Array.isArray(doc.errors)) return errorFromBody(status, text);
  } catch {
    // not JSON
  }
  const whose = `the client credentials from ${credentials.source} (client_id ${credentials.clientId})`;
  if (code === 'invalid_client') return new AdminApiError(`the server refused ${whose}: unknown, wrong secret or inactive account`, status, code);
  return new AdminApiError(`the token exchange for ${whose} failed (HTTP ${status})`, status, code);
}

export function createApiClient(settings: ApiSettings, opts: { timeoutMs?: number } = {}): ApiClient {
  const base = settings.url;
  const { credentials } = settings;
  const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;

  const tokens: TokenSource = tokenSource(async () => {
    const body = new URLSearchParams({ grant_type: 'client_credentials', client_id: credentials.clientId, client_secret: credentials.clientSecret });
    const res = await send(base, `${base}${TOKEN_PATH}`, { method: 'POST', headers: { accept: 'application/json' }, body }, timeoutMs);
    const text = await res.text();
    if (res.status !== 200) throw exchangeError(res.status, text, credentials);
    let doc: { access_token?: unknown; expires_in?: unknown };
    try {
      doc = JSON.parse(text) as typeof doc;
    } catch {
      throw new AdminApiError(`the server at ${base} answered the token exchange with something other than JSON`, res.status, 'bad_response');
    }
    if (typeof doc.access_token !== 'string' || typeof doc.expires_in !== 'number')
      throw new AdminApiError(`the server at ${base} answered the token exchange without access_token and expires_in`, res.status, 'bad_response');
    return { token: doc.access_token, expiresInSeconds: doc.expires_in };
  });

  const once = async (token: string, method: string, path: string, body: unknown, ms: number): Promise<Response> => {
    const headers: Record<string, string> = { authorization: `Bearer ${token}`, accept: JSONAPI_MEDIA_TYPE };
    if (body !== undefined) headers['content-type'] = JSONAPI_MEDIA_TYPE;
    const url = path.startsWith('/api/') ? `${base}${path}` : `${base}${API_PREFIX}${path}`;
    return send(base, url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) }, ms);
  };

  const request: ApiClient['request'] = async (method, path, body, o = {}) => {
    const ms = o.timeoutMs ?? timeoutMs;
    let token = await tokens.get();
    let res = await once(token, method, path, body, ms);
    if (res.status === 401) {
      // Revoked or expired under us (a clock apart, a restart with new keys): one fresh exchange.
      await res.text();
      token = await tokens.renew(token);
      res = await once(token, method, path, body, ms);
    }
    const text = await res.text();
    if (!res.ok) throw errorFromBody(res.status, text);
    if (text === '') return { data: null };
    let doc: unknown;
    try {
      doc = JSON.parse(text);
    } catch {
      throw new AdminApiError(`the server at ${base} answered with something other than JSON`, res.status, 'bad_response');
    }
    if (!doc || typeof doc !== 'object' || Array.isArray(doc) || !('data' in doc))
      throw new AdminApiError(`the server at ${base} answered without a JSON:API document`, res.status, 'bad_response');
    return doc as JsonApiDocument;
  };

  let identity: Promise<Identity> | undefined;
  const client: ApiClient = {
    url: base,
    request,
    get: (path) => request('GET', path),
    post: (path, body) => request('POST', path, body),
    patch: (path, body) => request('PATCH', path, body),
    async all(path, max = 10_000) {
      const out: Resource[] = [];
      let next: string | undefined = path;
      while (next !== undefined && out.length < max) {
        const doc = await request('GET', next);
        if (!Array.isArray(doc.data)) throw new AdminApiError(`the server at ${base} answered without a list`, 200, 'bad_response');
        out.push(...(doc.data as Resource[]));
        const link = doc.links?.next;
        next = typeof link === 'string' && link !== '' ? new URL(link, `${base}/`).pathname + new URL(link, `${base}/`).search : undefined;
      }
      return out;
    },
    identity() {
      return (identity ??= (async () => {
        const accounts = await client.get(`/credentials?${new URLSearchParams({ 'filter[client_id]': credentials.clientId })}`);
        const account = Array.isArray(accounts.data) ? (accounts.data[0] as Resource | undefined) : undefined;
        const orgs = await client.get('/organizations');
        const org = Array.isArray(orgs.data) ? (orgs.data[0] as Resource | undefined) : undefined;
        if (!account || !org)
          throw new AdminApiError(`the server at ${base} does not show the account of client_id ${credentials.clientId}`, 200, 'bad_response');
        return { clientId: credentials.clientId, credentialId: account.id, organizationId: org.id };
      })());
    },
  };
  return client;
}

/** The global options of the JSON:API commands (--url is the admin commands' too). */
export function addApiOptions(program: Command): void {
  program.option(
    '--credentials <file>',
    'JSON file with client_id and client_secret for the JSON:API commands (default: TRIBUTARY_CLIENT_ID/TRIBUTARY_CLIENT_SECRET, TRIBUTARY_CREDENTIALS_FILE or DATA_DIR/bootstrap.json)',
  );
}

/** A client for a command of `program`, from its --url and --credentials (or the settings). */
export function apiClientOf(program: Command): ApiClient {
  const { url, credentials } = program.opts() as { url?: string; credentials?: string };
  return createApiClient(resolveApiSettings({ url, credentialsFile: credentials }));
}
