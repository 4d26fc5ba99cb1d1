/**
 * Hooks every surface shares: the request id on every answer, and one log line when the
 * client goes away before its answer. Authentication and the rest are each surface's own
 * (registerSurface).
 */
import type { FastifyInstance } from 'fastify';
import type { Deps } from '../deps.ts';
import { JSONAPI_MEDIA_TYPE } from './jsonapi/errors.ts';

const JSONAPI_CHARSET = `${JSONAPI_MEDIA_TYPE}; charset=utf-8`;

export function registerHooks(app: FastifyInstance, deps: Deps): void {
  app.addHook('onRequest', (request, reply, done) => {
    // A client that closes its connection before the answer is no server failure: one line, at info.
    reply.raw.once('close', () => {
      if (!reply.raw.writableFinished) request.log.info(deps.draining.value ? 'connection closed at shutdown before the answer' : 'client went away');
    });
    done();
  });

  // A callback, not an async function: it runs on every answer and awaits nothing.
  app.addHook('onSend', (request, reply, payload, done) => {
    reply.header('x-request-id', request.id);
    // Fastify appends "; charset=utf-8" to JSON-like types; JSON:API 1.1 allows only ext/profile
    // (JSON:API documents and the admin API's errors).
    const type = reply.getHeader('content-type');
    if (typeof type === 'string' && type.length === JSONAPI_CHARSET.length && type.toLowerCase() === JSONAPI_CHARSET)
      reply.header('content-type', JSONAPI_MEDIA_TYPE);
    done(null, payload);
  });
}
