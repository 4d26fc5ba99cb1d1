/**
 * 405 for a known path asked with a method it does not serve, and OPTIONS on every known
 * path: both answer `Allow` with the methods the path does serve. Without this the router
 * answers 404 "No such route", which tells a client the path is wrong when only the
 * method is.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest, HTTPMethods } from 'fastify';
import { AppError } from '../errors.ts';

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
}

/**
 * Records every route added to `app` (a surface's context) from now on. The returned
 * function adds the refusing routes to `target`, a context whose error handler renders in
 * the same surface's shape: call it once every route of the surface exists.
 */
export function trackMethods(app: FastifyInstance): (target: FastifyInstance) => void {
  const paths = new Map<string, KnownPath>();
  let finished = false;
  app.addHook('onRoute', (route) => {
    if (finished) return;
    let known = paths.get(route.url);
    if (!known) {
      known = { routed: new Set(), served: new Set() };
      paths.set(route.url, known);
    }
    for (const m of [route.method].flat()) {
      known.routed.add(m);
      if (route.config?.refusesMethod !== true) known.served.add(m);
    }
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
        handler: async (request: FastifyRequest, reply: FastifyReply) => {
          reply.header('allow', allow);
          if (request.method === 'OPTIONS') return reply.code(204).send();
          throw new AppError('method_not_allowed', `${request.method} is not allowed here; allowed: ${allow}`);
        },
      });
    }
  };
}
