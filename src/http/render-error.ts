/**
 * How an error leaves any surface: translated into an AppError, logged once at the level
 * it deserves, then rendered by the surface's own renderer (each surface plugin installs
 * errorHandlerFor(itsRenderer)). Unknown errors are answered without detail: no stack,
 * SQL, path or secret ever reaches a body.
 */
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { AppError, fromPgError } from '../errors.ts';

/** Renders an AppError in one surface's shape; status, headers and logging are done. */
export type RenderError = (e: AppError, request: FastifyRequest, reply: FastifyReply) => FastifyReply;

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
        return new AppError(
          err.statusCode === 404 ? 'not_found' : err.statusCode === 413 ? 'payload_too_large' : 'bad_request',
          'The request could not be read',
        );
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

/** A surface's error handler: the one way from a thrown error to its answer. */
export function errorHandlerFor(render: RenderError) {
  return (err: unknown, request: FastifyRequest, reply: FastifyReply): FastifyReply => {
    const e = toAppError(err);
    request.errorCode = e.code;
    logFailure(request, e, err);
    if (e.headers) reply.headers(e.headers);
    if (e.retryAfter !== undefined) reply.header('retry-after', String(e.retryAfter));
    return render(e, request, reply);
  };
}

/** The shape of what belongs to no API surface (health, readiness, unknown paths): {error, code}. */
export const renderPlainError: RenderError = (e, _request, reply) =>
  reply
    .code(e.status)
    .type('application/json')
    .send(JSON.stringify({ error: e.detail, code: e.code }));
