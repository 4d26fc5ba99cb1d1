/**
 * Hooks every surface shares: the request id on every answer, and one log line when the
 * client goes away before its answer. Authentication and the rest are each surface's own
 * (registerSurface).
 */
import type { FastifyInstance } from 'fastify';
import type { Deps } from '../deps.ts';
import { JSONAPI_MEDIA_TYPE } from './jsonapi/errors.ts';

export function registerHooks(app: FastifyInstance, deps: Deps): void {
  app.addHook('onRequest', (request, reply, done) => {
    // A client that closes its connection before the answer is no server failure: one line, at info.
    reply.raw.once('close', () => {
      if (!reply.raw.writableFinished) request.log.info(deps.draining.value ? 'connection closed at shutdown before the answer' : 'client went away');
    });
    done();
  });

  app.addHook('onSend', async (request, reply, payload) => {
    reply.header('x-request-id', request.id);
    // Fastify appends "; charset=utf-8" to JSON-like types; JSON:API 1.1 allows only ext/profile
    // (JSON:API documents and the admin API's errors).
    if (/^application\/vnd\.api\+json; charset=utf-8$/i.test(String(reply.getHeader('content-type')))) reply.header('content-type', JSONAPI_MEDIA_TYPE);
    return payload;
  });
}
