/**
 * A surface (JSON:API, GraphQL, the token endpoint, the admin API, health and readiness,
 * next the webhooks) is one Fastify plugin: an encapsulated context with its own
 * authenticator hooks, its routes and its error renderer. Nothing outside it knows how it
 * authenticates or what its errors look like; a new surface is one more registerSurface().
 */
import type { FastifyInstance } from 'fastify';
import type { AppError } from '../errors.ts';
import { errorHandlerFor, type RenderError } from './render-error.ts';
import { trackMethods } from './methods.ts';

export interface SurfaceSpec {
  /** An unknown path under this prefix is answered 404 in this surface's shape. */
  prefix?: string;
  render: RenderError;
  /**
   * The answer to what Node's parser refused before there was a request (malformed 400,
   * headers too large 431, too slow 408), as bytes for the socket; the JSON:API error
   * document when absent.
   */
  renderRaw?: RenderRaw;
  /** Hooks (the authenticator first) and routes, on the surface's own context. */
  setup(scope: FastifyInstance): void | Promise<void>;
}

export type RenderRaw = (e: AppError, status: number) => { contentType: string; body: string };

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The surface that owns the route: the metrics' `surface` label. */
    surface?: string;
  }
}

/** Marks every route added to `scope` as `name`'s (before its routes are added). */
function nameRoutes(scope: FastifyInstance, name: string): void {
  scope.addHook('onRoute', (route) => {
    route.config = { ...route.config, surface: name };
  });
}

export function registerSurface(app: FastifyInstance, spec: SurfaceSpec, name: string): void {
  const handler = errorHandlerFor(spec.render);
  let addMethodRoutes: (target: FastifyInstance) => void = () => undefined;
  app.register(async (scope) => {
    nameRoutes(scope, name);
    scope.setErrorHandler(handler);
    addMethodRoutes = trackMethods(scope);
    await spec.setup(scope);
  });
  // 405 and OPTIONS for the surface's paths, in a sibling context: same renderer, none of
  // the surface's hooks, so a wrong method is answered before authentication and content
  // negotiation.
  app.register(async (scope) => {
    nameRoutes(scope, name);
    scope.setErrorHandler(handler);
    addMethodRoutes(scope);
  });
}
