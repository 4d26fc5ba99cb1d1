/**
 * A server span per request (docs/tracing.md), registered only when tracing is on: named by
 * the method and the route pattern (`POST /api/v1/webhooks/:token`), never the URL, since
 * trigger tokens are in paths; a valid incoming W3C `traceparent` is its parent, a malformed
 * one is ignored. Health checks and the console's files are not traced. A handler adds to
 * the span through `request.traceSpan` (the webhook surface: the run it made).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { METHODS } from 'node:http';
import type { TraceSpan, Tracing } from '../tracing.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** The request's server span; undefined when tracing is off. */
    traceSpan: TraceSpan | undefined;
  }
}

const KNOWN_METHODS = new Set(METHODS);
const UNTRACED = new Set(['health', 'console']);

const header = (v: string | string[] | undefined) => (typeof v === 'string' ? v : undefined);

function finish(request: FastifyRequest, reply: FastifyReply): void {
  const span = request.traceSpan;
  if (span === undefined) return;
  if (!reply.raw.writableFinished) span.set({ 'tributary.client_went_away': true });
  else {
    span.set({ 'http.response.status_code': reply.statusCode, 'tributary.error_code': request.errorCode });
    // A server span fails on the server's errors only (5xx); a 4xx is the client's.
    if (reply.statusCode >= 500) span.fail(request.errorCode ?? String(reply.statusCode), `answered ${reply.statusCode}`);
  }
  span.end();
}

export function registerRequestTracing(app: FastifyInstance, tracing: Tracing): void {
  app.decorateRequest('traceSpan', undefined);
  if (!tracing.enabled) return;
  app.addHook('onRequest', (request, reply, done) => {
    const surface = request.routeOptions.config?.surface;
    if (surface !== undefined && UNTRACED.has(surface)) return done();
    const route = request.routeOptions.url;
    const method = KNOWN_METHODS.has(request.method) ? request.method : '_OTHER';
    request.traceSpan = tracing.start(
      route === undefined ? method : `${method} ${route}`,
      'server',
      { traceparent: header(request.headers.traceparent), tracestate: header(request.headers.tracestate) },
      { 'http.request.method': method, 'http.route': route, 'tributary.surface': surface, 'tributary.request_id': request.id },
    );
    // On close rather than onResponse: a client that went away before its answer ends the span too.
    reply.raw.once('close', () => finish(request, reply));
    done();
  });
}
