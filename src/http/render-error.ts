/**
 * Every error of the HTTP surfaces is rendered here, once: an AppError (or something that
 * can be translated into one) becomes the surface's error shape. Unknown errors are logged
 * and answered without detail: no stack, SQL, path or secret ever reaches a body.
 */
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { AppError, fromPgError } from '../errors.ts';

export type Surface = 'jsonapi' | 'oauth' | 'admin' | 'plain';

export const JSONAPI_MEDIA_TYPE = 'application/vnd.api+json';

/** Fastify's own errors, by code, as AppErrors. */
function fromFastifyError(err: FastifyError): AppError | undefined {
  switch (err.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new AppError('payload_too_large', 'The request body is too large');
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new AppError('unsupported_media_type', 'The Content-Type of the request is not supported');
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new AppError('bad_request', 'The request body is empty');
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return new AppError('bad_request', 'The request body is not valid JSON');
    case 'FST_ERR_VALIDATION':
      return new AppError('invalid_request', err.message);
    default:
      if (typeof err.statusCode === 'number' && err.statusCode >= 400 && err.statusCode < 500) {
        return new AppError(err.statusCode === 404 ? 'not_found' : err.statusCode === 413 ? 'payload_too_large' : 'bad_request', 'The request could not be read');
      }
      return undefined;
  }
}

export function toAppError(err: unknown): AppError {
  if (err instanceof AppError) return err;
  // Fastify's errors and a request stream's (a client's reset is ECONNRESET "aborted") are
  // about the request, never about the database, though their codes may look alike.
  if (typeof err === 'object' && err !== null && typeof (err as FastifyError).code === 'string') {
    const f = fromFastifyError(err as FastifyError);
    if (f) return f;
  }
  const translated = fromPgError(err);
  if (translated instanceof AppError) return translated;
  return new AppError('internal_error', 'An unexpected error occurred', { cause: err });
}

/** The client closed its connection before the answer was sent. */
export function clientWentAway(request: FastifyRequest): boolean {
  return request.raw.socket?.destroyed === true || request.raw.readableAborted;
}

/**
 * Logs a failed request once, at the level it deserves, for every surface: the database
 * being unreachable is a warning (the answer is a 503 the client retries), anything
 * unexpected an error. A client that went away is logged where its connection closes.
 */
export function logFailure(request: FastifyRequest, e: AppError, err: unknown, msg = 'request failed'): void {
  if (clientWentAway(request)) return;
  if (e.code === 'unavailable') request.log.warn({ err: e.cause ?? err }, 'database unavailable');
  else if (e.status >= 500) request.log.error({ err: e.cause ?? err }, msg);
}

export function renderError(err: unknown, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const e = toAppError(err);
  request.errorCode = e.code;
  logFailure(request, e, err);
  const surface: Surface = request.routeOptions.config?.surface ?? (request.url.startsWith('/api/json/') ? 'jsonapi' : 'plain');
  if (e.headers) reply.headers(e.headers);
  if (e.retryAfter !== undefined) reply.header('retry-after', String(e.retryAfter));
  // RFC 6749 5.2: a request the token endpoint cannot read is 400 invalid_request,
  // whatever status another surface gives the same fault (a too-deep JSON body is 422).
  reply.code(surface === 'oauth' && e.code === 'invalid_request' ? 400 : e.status);
  if (surface === 'jsonapi' || surface === 'admin') {
    const error: Record<string, unknown> = { id: request.id, status: String(e.status), code: e.code, title: e.title, detail: e.detail };
    if (e.source) error.source = e.source;
    return reply.type(JSONAPI_MEDIA_TYPE).send(JSON.stringify({ errors: [error], jsonapi: { version: '1.1' } }));
  }
  if (surface === 'oauth') {
    reply.header('cache-control', 'no-store').header('pragma', 'no-cache');
    const code = e.status === 429 || e.status === 503 ? 'temporarily_unavailable' : e.status >= 500 ? 'server_error' : 'invalid_request';
    return reply.type('application/json').send(JSON.stringify({ error: code, error_description: e.detail }));
  }
  return reply.type('application/json').send(JSON.stringify({ error: e.detail, code: e.code }));
}
