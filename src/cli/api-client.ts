/**
 * The CLI's client of the JSON:API (/api/json/v1): @tributary/client, the SDK any program of
 * the user's would use (token exchange and renewal, one re-exchange on 401, retries of 429
 * and 503 with one Idempotency-Key per call). What is the CLI's own stays here: where the
 * service account's credentials come from, how long one request may take, and its failures
 * as AdminApiError, so reportFailure prints them as every other command's. Neither the
 * secret nor a token is ever printed or put in an error message.
 *
 * The CLI imports the SDK's sources by path: the package's own entry is its build (dist/),
 * which a checkout does not have, and Node runs these sources as the rest of the CLI.
 */
import fs from 'node:fs';
import type { Command } from 'commander';
import { createClient, type Collection, type ListOptions, type TributaryClient, type TributaryError } from '../../packages/client/src/index.ts';
import { loadCliConfig, type CliConfig } from '../config.ts';
import { AdminApiError, DEFAULT_TIMEOUT_MS, networkReason, resolveServerUrl, UsageError } from './admin-client.ts';

/** One resource object of a JSON:API document, its attributes read by name. */
export interface Resource {
  type: string;
  id: string;
  attributes: Record<string, unknown>;
  relationships?: Record<string, unknown>;
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

/** The SDK's client, whose every failure is an AdminApiError, with what the commands add. */
export interface ApiClient extends TributaryClient {
  readonly url: string;
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

/** A failure of the SDK in the CLI's words: which server, which credentials. */
export function cliError(err: TributaryError, settings: ApiSettings, timeoutMs: number): AdminApiError {
  const base = settings.url;
  const { credentials } = settings;
  if (err.status === 0) {
    if (err.code === 'timeout') return new AdminApiError(`no answer from the server at ${base} within ${Math.round(timeoutMs / 1000)} s`, null, 'timeout');
    const { code, reason } = networkReason(err.cause);
    return new AdminApiError(
      `cannot reach the server at ${base}${reason ? ` (${reason})` : ''}`,
      null,
      code === 'ECONNREFUSED' ? 'connection_refused' : 'connection_failed',
    );
  }
  if (err.tokenExchange) {
    const whose = `the client credentials from ${credentials.source} (client_id ${credentials.clientId})`;
    if (err.code === 'invalid_client') return new AdminApiError(`the server refused ${whose}: unknown, wrong secret or inactive account`, err.status, err.code);
    return new AdminApiError(`the token exchange for ${whose} failed (HTTP ${err.status})${err.detail ? `: ${err.detail}` : ''}`, err.status, err.code);
  }
  if (err.code === 'bad_response') return new AdminApiError(`the server at ${base} gave an answer the CLI cannot read: ${err.detail}`, err.status, err.code);
  // Not a JSON:API error (a proxy's page, say): its text is no message for a terminal.
  if (err.code === 'http_error' && err.title === undefined && err.source === undefined)
    return new AdminApiError(`the server answered HTTP ${err.status}`, err.status, err.code);
  const source = err.source ? { ...err.source } : undefined;
  return new AdminApiError(err.detail ?? err.title ?? `the server answered HTTP ${err.status}`, err.status, err.code, source, err.meta);
}

/** A resource of the SDK's, its attributes read by name (the server always sends them). */
export function asResource(r: unknown): Resource {
  return r as Resource;
}

/** Every resource of a list, page after page. */
export async function all<C extends Collection>(client: TributaryClient, collection: C, opts?: ListOptions<C>): Promise<Resource[]> {
  const out: Resource[] = [];
  for await (const r of client.iterate(collection, opts)) out.push(asResource(r));
  return out;
}

export function createApiClient(settings: ApiSettings, opts: { timeoutMs?: number; fetch?: typeof fetch } = {}): ApiClient {
  const { credentials } = settings;
  const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const client = createClient({
    baseUrl: settings.url,
    clientId: credentials.clientId,
    clientSecret: credentials.clientSecret,
    timeoutMs,
    // Someone waits at the terminal: two more tries (a server restarting, a 503) rather than the SDK's four.
    maxAttempts: 3,
    mapError: (err) => cliError(err, settings, timeoutMs),
    ...(opts.fetch ? { fetch: opts.fetch } : {}),
  });

  let identity: Promise<Identity> | undefined;
  return Object.assign(client, {
    url: settings.url,
    identity() {
      return (identity ??= (async () => {
        const [accounts, orgs] = await Promise.all([client.list('credentials', { filter: { client_id: credentials.clientId } }), client.list('organizations')]);
        const account = accounts.data[0];
        const org = orgs.data[0];
        if (!account || !org)
          throw new AdminApiError(`the server at ${settings.url} does not show the account of client_id ${credentials.clientId}`, 200, 'bad_response');
        return { clientId: credentials.clientId, credentialId: account.id, organizationId: org.id };
      })());
    },
  });
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
