/**
 * The one error type of the service. Services throw AppError; each surface (JSON:API,
 * GraphQL, webhooks, token exchange) renders it in one place. Anything else that escapes
 * a handler is an internal error and is rendered without detail.
 */
/** What a client is told about unstorable text; the pointer goes where each surface puts one. */
export const UNSTORABLE_TEXT = 'A string or member name holds \\u0000 or an unpaired surrogate, which the database cannot store';

export const ERROR_STATUS = {
  bad_request: 400,
  invalid_query: 400,
  unauthorized: 401,
  invalid_client: 401,
  unsupported_grant_type: 400,
  invalid_scope: 400,
  forbidden: 403,
  not_found: 404,
  method_not_allowed: 405,
  not_acceptable: 406,
  request_timeout: 408,
  conflict: 409,
  type_mismatch: 409,
  idempotency_key_reused: 409,
  idempotency_key_in_flight: 409,
  stale_lock_version: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  invalid_request: 422,
  rate_limited: 429,
  internal_error: 500,
  unavailable: 503,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

const TITLES: Record<ErrorCode, string> = {
  bad_request: 'Bad request',
  invalid_query: 'Invalid query parameter',
  unauthorized: 'Unauthorized',
  invalid_client: 'Invalid client',
  unsupported_grant_type: 'Unsupported grant type',
  invalid_scope: 'Invalid scope',
  forbidden: 'Forbidden',
  not_found: 'Not found',
  method_not_allowed: 'Method not allowed',
  not_acceptable: 'Not acceptable',
  request_timeout: 'Request timeout',
  conflict: 'Conflict',
  type_mismatch: 'Type mismatch',
  idempotency_key_reused: 'Idempotency key reused',
  idempotency_key_in_flight: 'Idempotency key in flight',
  stale_lock_version: 'Stale lock version',
  payload_too_large: 'Payload too large',
  unsupported_media_type: 'Unsupported media type',
  invalid_request: 'Invalid request',
  rate_limited: 'Rate limited',
  internal_error: 'Internal error',
  unavailable: 'Service unavailable',
};

export interface ErrorSource {
  pointer?: string;
  parameter?: string;
  header?: string;
}

export interface AppErrorOptions {
  source?: ErrorSource;
  /** Seconds, sent as Retry-After. */
  retryAfter?: number;
  headers?: Record<string, string>;
  cause?: unknown;
  /** The error object's `meta`: where in a text the caller sent the problem is (a workflow file's line and column). */
  meta?: Record<string, unknown>;
}

export class AppError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly title: string;
  readonly detail: string;
  readonly source: ErrorSource | undefined;
  readonly retryAfter: number | undefined;
  readonly headers: Record<string, string> | undefined;
  readonly meta: Record<string, unknown> | undefined;

  constructor(code: ErrorCode, detail?: string, options: AppErrorOptions = {}) {
    super(detail ?? TITLES[code], options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'AppError';
    this.code = code;
    this.status = ERROR_STATUS[code];
    this.title = TITLES[code];
    this.detail = detail ?? TITLES[code];
    this.source = options.source;
    this.retryAfter = options.retryAfter;
    this.headers = options.headers;
    this.meta = options.meta;
  }
}

/** Validation failure at a JSON pointer of the request document. */
export function invalidAt(pointer: string, detail: string): AppError {
  return new AppError('invalid_request', detail, { source: { pointer } });
}

/** A name the caller wrote, as an error message quotes it: JSON-quoted and cut short. */
export function quoteName(name: string): string {
  return JSON.stringify(name.length > 64 ? `${name.slice(0, 64)}...` : name);
}

/** A malformed query parameter. */
export function invalidParam(parameter: string, detail: string): AppError {
  return new AppError('invalid_query', detail, { source: { parameter } });
}

interface PgLikeError {
  code?: unknown;
  constraint?: unknown;
}

/**
 * Translates PostgreSQL errors into AppErrors: the only place that knows SQLSTATEs.
 * `constraints` maps a constraint name to the pointer and text a client should see,
 * so a unique violation reads as a validation error on the field that caused it.
 */
export function fromPgError(err: unknown, constraints: Readonly<Record<string, [pointer: string, detail: string]>> = {}): unknown {
  if (err instanceof AppError || typeof err !== 'object' || err === null) return err;
  if (isDatabaseUnavailable(err)) return databaseUnavailable(err);
  const { code, constraint } = err as PgLikeError;
  if (typeof code !== 'string') return err;
  const known = typeof constraint === 'string' ? constraints[constraint] : undefined;
  switch (code) {
    case '23505': // unique_violation
    case '23503': // foreign_key_violation
    case '23514': // check_violation
    case '23502': // not_null_violation
      if (known) return invalidAt(known[0], known[1]);
      return new AppError('invalid_request', code === '23505' ? 'A resource with these values already exists' : 'The request conflicts with stored data', {
        cause: err,
      });
    case '22P02': // invalid_text_representation
    case '22007': // invalid_datetime_format
    case '22008': // datetime_field_overflow
    case '22003': // numeric_value_out_of_range
    case '54000': // program_limit_exceeded (e.g. jsonb too deep)
      return new AppError('invalid_request', 'A value is out of range or malformed', { cause: err });
    // The body checks refuse such text where it enters (json.ts); this is for any path they miss.
    case '22021': // character_not_in_repertoire (NUL in text)
    case '22P05': // untranslatable_character (\u0000 in jsonb)
      return new AppError('invalid_request', UNSTORABLE_TEXT, { cause: err });
    case '40001': // serialization_failure
    case '40P01': // deadlock_detected
    case '55P03': // lock_not_available
      return new AppError('unavailable', 'The database is busy; retry shortly', { retryAfter: 1, cause: err });
    default:
      return err;
  }
}

// SQLSTATEs that mean the server ended or refused the session, not that the statement was wrong.
const UNAVAILABLE_SQLSTATES = new Set(['57P01', '57P02', '57P03', '53300', '53400']);
// Socket and resolver failures on the way to the database.
const UNAVAILABLE_ERRNOS = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EPIPE',
  'EMFILE',
  'ENFILE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EADDRNOTAVAIL',
]);
// What pg and pg-pool throw, without a code, when a session is lost or cannot be opened.
const UNAVAILABLE_MESSAGE = /^(Connection terminated|Client has encountered a connection error|timeout exceeded when trying to connect|Connection timeout)/i;

/**
 * The one classification of "the database cannot be reached right now", whatever the
 * engine, driver or surface: the session was ended (admin shutdown, restart), cannot be
 * opened (refused, too many connections, out of file handles) or was cut. Every surface
 * answers it with 503 and Retry-After. Only errors that came from the database layer may
 * be asked: a client's own socket error (ECONNRESET "aborted") is not one.
 */
export function isDatabaseUnavailable(err: unknown): boolean {
  if (typeof err !== 'object' || err === null || err instanceof AppError) return false;
  const { code, message } = err as { code?: unknown; message?: unknown };
  if (typeof code === 'string' && (UNAVAILABLE_SQLSTATES.has(code) || UNAVAILABLE_ERRNOS.has(code) || /^08[0-9A-Z]{3}$/.test(code))) return true;
  return typeof code !== 'string' && typeof message === 'string' && UNAVAILABLE_MESSAGE.test(message);
}

export function databaseUnavailable(cause?: unknown): AppError {
  return new AppError('unavailable', 'The database is unavailable; retry shortly', { retryAfter: DATABASE_RETRY_AFTER_SECONDS, cause });
}

/** Seconds a client is asked to wait while the database is unreachable. */
export const DATABASE_RETRY_AFTER_SECONDS = 5;

// A transaction that lost to another (serialization failure, deadlock): run again whole, it may commit.
const CONFLICT_SQLSTATES = new Set(['40001', '40P01']);
// Besides a conflict: a lock not granted, a statement cancelled, the server short of resources, the session lost.
const BUSY_SQLSTATE = /^(55P03|57014|53\d{3}|08\w{3})$/;

/** A transaction rolled back because it lost to another; running it again may commit. */
export function isTransactionConflict(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && CONFLICT_SQLSTATES.has(code);
}

/** A database error that a later attempt may not meet: unreachable, busy or in conflict. */
export function isTransientDatabaseError(err: unknown): boolean {
  if (isDatabaseUnavailable(err) || isTransactionConflict(err)) return true;
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && BUSY_SQLSTATE.test(code);
}

/**
 * Background work (a workflow step, a call through a connector) that failed, sorted once:
 * transient when a later attempt may succeed (and not before `retryAfterMs`, when given),
 * else permanent. The worker decides between retrying and failing on this alone.
 */
export class WorkFailure extends Error {
  readonly transient: boolean;
  readonly retryAfterMs: number | undefined;
  constructor(message: string, opts: { transient: boolean; retryAfterMs?: number; cause?: unknown }) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'WorkFailure';
    this.transient = opts.transient;
    this.retryAfterMs = opts.retryAfterMs;
  }
}

/**
 * A failure's text as logs and traces show it: up to its first colon, what failed without
 * the details after it, which may quote data (a provider's answer, an expression's message,
 * a field's value). The step record keeps the whole text.
 */
export function failureSummary(text: string): string {
  const i = text.indexOf(': ');
  return i < 0 ? text : text.slice(0, i);
}

/** A failure a retry cannot fix. */
export const permanentFailure = (message: string, cause?: unknown) => new WorkFailure(message, { transient: false, cause });
