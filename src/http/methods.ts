/**
 * 405 for a known path asked with a method it does not serve, and OPTIONS on every known
 * path: both answer `Allow` with the methods the path does serve. Without this the router
 * answers 404 "No such route", which tells a client the path is wrong when only the
 * method is.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest, HTTPMethods } from 'fastify';
import { AppError } from '../errors.ts';
import { renderError, type Surface } from './render-error.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route only refuses its methods (a surface's own 405): they are not in Allow. */
    refusesMethod?: boolean;
  }
}

const METHODS: readonly HTTPMethods[] = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];

interface KnownPath {
  /** Methods with a route, including those that only refuse. */
  routed: Set<string>;
  /** Methods the path serves: what Allow lists. */
  served: Set<string>;
  surface: Surface | undefined;
}

/**
 * Records every route added from now on. The returned function adds the refusing routes to
 * `target`: call it once every route exists (in a plugin registered last, so that routes of
 * earlier plugins are in).
 */
export function trackMethods(app: FastifyInstance): (target: FastifyInstance) => void {
  const paths = new Map<string, KnownPath>();
  let finished = false;
  app.addHook('onRoute', (route) => {
    if (finished) return;
    let known = paths.get(route.url);
    if (!known) {
      known = { routed: new Set(), served: new Set(), surface: undefined };
      paths.set(route.url, known);
    }
    for (const m of [route.method].flat()) {
      known.routed.add(m);
      if (route.config?.refusesMethod !== true) known.served.add(m);
    }
    known.surface ??= route.config?.surface;
  });

  return (target) => {
    finished = true;
    for (const [url, known] of paths) {
      if (known.served.size === 0) continue;
      if (known.served.has('GET')) known.served.add('HEAD');
      const allow = METHODS.filter((m) => known.served.has(m)).join(', ');
      const missing = METHODS.filter((m) => !known.routed.has(m) && !(m === 'HEAD' && known.routed.has('GET')));
      if (missing.length === 0) continue;
      target.route({
        method: missing,
        url,
        // JSON:API content negotiation must not answer before the 405: the JSON:API error
        // document comes from the path (render-error), not from this route's surface.
        config: known.surface === 'jsonapi' ? {} : { surface: known.surface },
        handler: async (request: FastifyRequest, reply: FastifyReply) => {
          reply.header('allow', allow);
          if (request.method === 'OPTIONS') return reply.code(204).send();
          return renderError(new AppError('method_not_allowed', `${request.method} is not allowed here; allowed: ${allow}`), request, reply);
        },
      });
    }
  };
}
