/**
 * The CLI's client of the JSON:API (/api/json/v1), as a service account: its client
 * credentials (a JSON file {client_id, client_secret}: --credentials-file, else
 * DATA_DIR/bootstrap.json) are exchanged for a bearer token once per command. Errors come
 * back as the admin client's (AdminApiError), so reportFailure prints them alike.
 */
import fs from 'node:fs';
import path from 'node:path';
import { loadCliConfig, type CliConfig } from '../config.ts';
import { AdminApiError, CommandFailure, UsageError, errorFromBody, networkReason } from './admin-client.ts';

const TIMEOUT_MS = 60_000;

export interface ApiClient {
  readonly url: string;
  /** One call under /api/json/v1; the answer's JSON document (an empty object for 204). */
  request(method: 'GET' | 'POST' | 'PATCH', path: string, body?: unknown): Promise<Record<string, unknown>>;
}

export interface ApiClientOptions {
  url?: string | undefined;
  credentialsFile?: string | undefined;
}

/** client_id and client_secret from the file; a failure says which file and what is wrong. */
export function readCredentials(file: string): { clientId: string; clientSecret: string } {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    throw new UsageError(
      `no service account credentials: cannot read ${file} (${code === 'ENOENT' ? 'no such file' : String(code)}); pass --credentials-file with a JSON file {"client_id", "client_secret"}`,
    );
  }
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    throw new UsageError(`${file} is not JSON: it must hold {"client_id", "client_secret"}`);
  }
  const d = (doc ?? {}) as Record<string, unknown>;
  if (typeof d.client_id !== 'string' || typeof d.client_secret !== 'string') throw new UsageError(`${file} must hold {"client_id", "client_secret"}`);
  return { clientId: d.client_id, clientSecret: d.client_secret };
}

async function send(base: string, url: string, init: RequestInit): Promise<Response> {
  try {
    return await fetch(url, { ...init, signal: AbortSignal.timeout(TIMEOUT_MS) });
  } catch (err) {
    if (err instanceof Error && (err.name === 'TimeoutError' || err.name === 'AbortError'))
      throw new AdminApiError(`no answer from the server at ${base} within ${TIMEOUT_MS / 1000} s`, null, 'timeout');
    const { code, reason } = networkReason(err);
    throw new AdminApiError(
      `cannot reach the server at ${base}${reason ? ` (${reason})` : ''}`,
      null,
      code === 'ECONNREFUSED' ? 'connection_refused' : 'connection_failed',
    );
  }
}

export function createApiClient(opts: ApiClientOptions, load: () => CliConfig = loadCliConfig): ApiClient {
  let config: CliConfig | undefined;
  const cfg = () => (config ??= load());
  const base = (opts.url ?? cfg().url).replace(/\/+$/, '');
  if (!/^https?:\/\//i.test(base)) throw new UsageError(`--url must be an http(s) URL, got "${base}"`);
  let token: Promise<string> | undefined;
  const exchange = async () => {
    const { clientId, clientSecret } = readCredentials(opts.credentialsFile ?? path.join(cfg().dataDir, 'bootstrap.json'));
    const body = new URLSearchParams({ grant_type: 'client_credentials', client_id: clientId, client_secret: clientSecret });
    const res = await send(base, `${base}/api/v1/oauth/token`, { method: 'POST', body });
    const text = await res.text();
    if (!res.ok) {
      const err = errorFromBody(res.status, text);
      throw new AdminApiError(`the token exchange was refused: ${err.message}`, res.status, err.code);
    }
    const access = (JSON.parse(text) as { access_token?: unknown }).access_token;
    if (typeof access !== 'string') throw new CommandFailure(`the server at ${base} answered the token exchange without an access_token`, 'bad_response');
    return access;
  };
  return {
    url: base,
    async request(method, p, body) {
      token ??= exchange();
      const headers: Record<string, string> = { authorization: `Bearer ${await token}`, accept: 'application/vnd.api+json' };
      if (body !== undefined) headers['content-type'] = 'application/vnd.api+json';
      const res = await send(base, `${base}/api/json/v1${p}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
      const text = await res.text();
      if (!res.ok) throw errorFromBody(res.status, text);
      if (text === '') return {};
      try {
        return JSON.parse(text) as Record<string, unknown>;
      } catch {
        throw new AdminApiError(`the server at ${base} answered with something other than JSON`, res.status, 'bad_response');
      }
    },
  };
}
