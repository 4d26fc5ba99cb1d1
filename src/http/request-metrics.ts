/**
 * Every answered request counted once, by surface, route pattern, method and status, with
 * its latency; and the 429s of rate windows by surface. The route is Fastify's pattern
 * (`/api/v1/webhooks/:token`), never the URL: trigger tokens are in paths.
 */
import type { FastifyInstance } from 'fastify';
import type { Metrics } from '../metrics.ts';
import { METHODS } from 'node:http';

/** The label of a request no route matched (an unknown path, a URL the router could not read). */
export const UNMATCHED_ROUTE = 'unmatched';

// A method outside these (anything a client sends) is one label, so that labels stay bounded.
const KNOWN_METHODS = new Set(METHODS);

export function registerRequestMetrics(app: FastifyInstance, metrics: Metrics, surfaceOfPath: (path: string) => string | undefined): void {
  app.addHook('onResponse', async (request, reply) => {
    const route = request.routeOptions.url;
    // An unmatched path is still said to be the surface whose prefix it has (its answer has that shape).
    const surface = request.routeOptions.config?.surface ?? surfaceOfPath(request.url) ?? 'none';
    const method = KNOWN_METHODS.has(request.method) ? request.method : 'OTHER';
    metrics.httpRequest(surface, route ?? UNMATCHED_ROUTE, method, reply.statusCode, reply.elapsedTime / 1000);
    if (reply.statusCode === 429) metrics.rateLimited(surface);
  });
}
