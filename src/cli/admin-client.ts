/**
 * The CLI's client of the admin API (/admin/v1): JSON in, {"data": ...} out, errors in the
 * JSON:API error shape. Settings come from the command line, else from loadCliConfig().
 */
import { CommanderError } from 'commander';
import { ConfigError, loadCliConfig, type CliConfig } from '../config.ts';
import { readAdminTokenFile } from '../admin-token.ts';

/** A failed admin call: `status` is the HTTP status, or null when no answer came back. */
export class AdminApiError extends Error {
  readonly status: number | null;
  readonly code: string;
  readonly source: Record<string, unknown> | undefined;
  /** The error object's meta (a test run's workflow_file problem: member, line, column). */
  readonly meta: Record<string, unknown> | undefined;

  constructor(message: string, status: number | null, code: string, source?: Record<string, unknown>, meta?: Record<string, unknown>) {
    super(message);
    this.name = 'AdminApiError';
    this.status = status;
    this.code = code;
    this.source = source;
    this.meta = meta;
  }
}

/** A command that could not do its work for a reason other than the server's answer (exit code 1). */
export class CommandFailure extends Error {
  readonly code: string;

  constructor(message: string, code: string) {
    super(message);
    this.name = 'CommandFailure';
    this.code = code;
  }
}

/** A problem with how the CLI was called or configured (exit code 2). */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

export interface AdminClient {
  readonly url: string;
  request(method: 'GET' | 'POST' | 'PATCH' | 'DELETE', path: string, body?: unknown, opts?: { timeoutMs?: number }): Promise<Record<string, unknown>>;
  /** A GET answered with a list: the whole document, {"data": [...], "has_more"}. */
  list(path: string): Promise<{ data: Array<Record<string, unknown>>; has_more: boolean }>;
}

export interface ClientOptions {
  url?: string | undefined;
  adminToken?: string | undefined;
}

/**
 * The admin API's URL and token: --url / --admin-token when given, otherwise TRIBUTARY_URL
 * (or http://127.0.0.1:$PORT) and TRIBUTARY_ADMIN_TOKEN or the DATA_DIR/admin-token file.
 * The environment is read (through loadCliConfig) only when an option is missing.
 */
export function resolveClientSettings(opts: ClientOptions, load: () => CliConfig = loadCliConfig): { url: string; adminToken: string } {
  let config: CliConfig | undefined;
  const cfg = () => (config ??= load());
  const url = resolveServerUrl(opts.url, cfg);
  const adminToken = opts.adminToken ?? cfg().adminToken ?? readAdminTokenFile(cfg().dataDir);
  if (!adminToken) {
    throw new UsageError('no admin token: pass --admin-token, set TRIBUTARY_ADMIN_TOKEN, or run where DATA_DIR/admin-token is readable');
  }
  return { url, adminToken };
}

/** The server's base URL without a trailing slash: --url when given, else TRIBUTARY_URL or http://127.0.0.1:$PORT. */
export function resolveServerUrl(option: string | undefined, cfg: () => CliConfig): string {
  const rawUrl = option ?? cfg().url;
  let parsed: URL;
  try {
    parsed = new URL(rawUrl);
  } catch {
    throw new UsageError(`--url must be an http(s) URL, got "${rawUrl}"`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new UsageError(`--url must be an http(s) URL, got "${rawUrl}"`);
  return rawUrl.replace(/\/+$/, '');
}

export const DEFAULT_TIMEOUT_MS = 60_000;

/** The socket error code under fetch's "fetch failed" (ECONNREFUSED, ENOTFOUND, ...), or the innermost message. */
export function networkReason(err: unknown): { code: string | undefined; reason: string | undefined } {
  let e: unknown = err;
  let reason: string | undefined;
  for (let i = 0; i < 5 && e && typeof e === 'object'; i++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') return { code, reason: code };
    const errors = (e as { errors?: unknown }).errors;
    if (Array.isArray(errors) && errors.length > 0) return networkReason(errors[0]);
    if (e !== err && typeof (e as { message?: unknown }).message === 'string') reason = (e as { message: string }).message;
    e = (e as { cause?: unknown }).cause;
  }
  return { code: undefined, reason };
}

/** The error an admin API error answer describes (JSON:API error shape), or a generic one. */
export function errorFromBody(status: number, text: string): AdminApiError {
  try {
    const doc = JSON.parse(text) as { errors?: Array<Record<string, unknown>> };
    const first = Array.isArray(doc.errors) ? doc.errors[0] : undefined;
    if (first && typeof first === 'object') {
      const detail = typeof first.detail === 'string' ? first.detail : typeof first.title === 'string' ? first.title : `HTTP ${status}`;
      const code = typeof first.code === 'string' ? first.code : 'http_error';
      const source = first.source && typeof first.source === 'object' ? (first.source as Record<string, unknown>) : undefined;
      return new AdminApiError(detail, status, code, source);
    }
  } catch {
    // not JSON: fall through
  }
  return new AdminApiError(`the server answered HTTP ${status}`, status, 'http_error');
}

/**
 * One HTTP call to the server at `base`; a failure to get an answer becomes an AdminApiError
 * (timeout, connection refused, ...) naming the server, never the request's headers.
 */
export async function send(base: string, url: string, init: RequestInit, timeoutMs: number): Promise<Response> {
  try {
    return await fetch(url, { ...init, signal: timeoutMs > 0 ? AbortSignal.timeout(timeoutMs) : undefined });
  } catch (err) {
    if (err instanceof Error && (err.name === 'TimeoutError' || err.name === 'AbortError')) {
      throw new AdminApiError(`no answer from the server at ${base} within ${Math.round(timeoutMs / 1000)} s`, null, 'timeout');
    }
    const { code, reason } = networkReason(err);
    throw new AdminApiError(
      `cannot reach the server at ${base}${reason ? ` (${reason})` : ''}`,
      null,
      code === 'ECONNREFUSED' ? 'connection_refused' : 'connection_failed',
    );
  }
}

export function createAdminClient(settings: { url: string; adminToken: string }): AdminClient {
  const base = settings.url;
  /** One call; the parsed JSON answer of a 2xx, else the error the answer describes. */
  const call = async (method: string, path: string, body: unknown, timeoutMs: number): Promise<Record<string, unknown>> => {
    const headers: Record<string, string> = { authorization: `Bearer ${settings.adminToken}`, accept: 'application/json' };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const res = await send(base, `${base}/admin/v1${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) }, timeoutMs);
    const text = await res.text();
    if (!res.ok) throw errorFromBody(res.status, text);
    let doc: unknown;
    try {
      doc = JSON.parse(text);
    } catch {
      throw new AdminApiError(`the server at ${base} answered with something other than JSON`, res.status, 'bad_response');
    }
    if (!doc || typeof doc !== 'object' || Array.isArray(doc))
      throw new AdminApiError(`the server at ${base} answered without a data object`, res.status, 'bad_response');
    return doc as Record<string, unknown>;
  };
  return {
    url: base,
    async request(method, path, body, opts = {}) {
      const { data } = await call(method, path, body, opts.timeoutMs ?? DEFAULT_TIMEOUT_MS);
      if (!data || typeof data !== 'object' || Array.isArray(data)) {
        throw new AdminApiError(`the server at ${base} answered without a data object`, 200, 'bad_response');
      }
      return data as Record<string, unknown>;
    },
    async list(path) {
      const doc = await call('GET', path, undefined, DEFAULT_TIMEOUT_MS);
      if (!Array.isArray(doc.data)) throw new AdminApiError(`the server at ${base} answered without a list`, 200, 'bad_response');
      return { data: doc.data as Array<Record<string, unknown>>, has_more: doc.has_more === true };
    },
  };
}

export const EXIT_FAILURE = 1;
export const EXIT_USAGE = 2;
export const EXIT_CONFIG = 78;

/**
 * The one place a failed CLI command is reported: with --json exactly one JSON document on
 * stdout, otherwise a line on stderr; then the exit code as a CommanderError. Anything
 * that is not one of our errors is rethrown for the top level.
 */
export function reportFailure(err: unknown, asJson: boolean, io: { out: (s: string) => void; err: (s: string) => void }): never {
  let doc: { error: string; status: number | null; code: string; source?: Record<string, unknown> };
  let exitCode: number;
  if (err instanceof AdminApiError) {
    doc = { error: err.message, status: err.status, code: err.code, ...(err.source ? { source: err.source } : {}) };
    exitCode = EXIT_FAILURE;
  } else if (err instanceof CommandFailure) {
    doc = { error: err.message, status: null, code: err.code };
    exitCode = EXIT_FAILURE;
  } else if (err instanceof UsageError) {
    doc = { error: err.message, status: null, code: 'usage_error' };
    exitCode = EXIT_USAGE;
  } else if (err instanceof ConfigError) {
    doc = { error: err.message, status: null, code: 'config_error' };
    exitCode = EXIT_CONFIG;
  } else {
    throw err;
  }
  if (asJson) {
    io.out(`${JSON.stringify(doc)}\n`);
  } else {
    const where = doc.source && typeof doc.source.pointer === 'string' ? ` at ${doc.source.pointer}` : '';
    io.err(`error: ${doc.error}${where}${doc.status !== null ? ` (HTTP ${doc.status} ${doc.code})` : ''}\n`);
  }
  throw new CommanderError(exitCode, 'tributary.failed', doc.error);
}

/** A command's body run so that a failure is reported once, by reportFailure (anything else, a CommanderError included, goes up as it is). */
export function commandRunner(asJson: () => boolean, io: { out: (s: string) => void; err: (s: string) => void }) {
  return async (work: () => Promise<void>): Promise<void> => {
    try {
      await work();
    } catch (err) {
      reportFailure(err, asJson(), io);
    }
  };
}
