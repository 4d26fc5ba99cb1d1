/**
 * buildApp(deps): the Fastify instance with every surface. No I/O happens at import time;
 * main.ts (or a test) creates the deps, builds the app and listens.
 */
import Fastify, { type FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import type { Deps } from './deps.ts';
import { AppError, DATABASE_RETRY_AFTER_SECONDS, databaseUnavailable } from './errors.ts';
import { registerBodyParsers } from './http/body.ts';
import { registerHooks } from './http/hooks.ts';
import { registerRequestMetrics } from './http/request-metrics.ts';
import { registerRequestTracing } from './http/request-trace.ts';
import { connectionOptions, registerConnectionHooks } from './http/connections.ts';
import { errorHandlerFor, renderPlainError } from './http/render-error.ts';
import { registerSurface, type SurfaceSpec } from './http/surface.ts';
import { RequestLogController, requestId, requestLogger } from './http/request-log.ts';
import { tokenSurface } from './token/surface.ts';
import { adminSurface } from './admin/surface.ts';
import { jsonApiSurface } from './http/jsonapi/surface.ts';
import { graphqlSurface } from './graphql/surface.ts';
import { webhookSurface } from './webhooks/surface.ts';
import { printSchema } from 'graphql';
import { GRAPHQL_SDL_PATH, OPENAPI_PATH, openApiText } from './http/jsonapi/openapi.ts';
import { schema } from './graphql/schema.ts';
import { CONSOLE_PATH, consoleSurface } from './console/surface.ts';

const HEALTH_ROUTES = new Set(['/healthz', '/readyz']);
/** How recent a successful query must be for /readyz to skip its own. */
const RECENT_ANSWER_MS = 1000;

/** Health and readiness: public, answered in the plain shape. */
function healthSurface(deps: Deps): SurfaceSpec {
  return {
    render: renderPlainError,
    setup(scope) {
      scope.get('/healthz', async () => ({ status: 'ok' }));
      // What a request would get right now: 503 while draining or while the database does not
      // answer; and where its rate window is counted (Redis, or this process while Redis is out).
      scope.get('/readyz', async (_request, reply) => {
        const rateLimit = deps.limiter.state();
        if (deps.draining.value) return reply.code(503).send({ status: 'draining', rate_limit: rateLimit });
        if (!deps.ready.value) {
          reply.header('retry-after', String(DATABASE_RETRY_AFTER_SECONDS));
          return reply.code(503).send({ status: 'starting', rate_limit: rateLimit });
        }
        // With every pooled connection busy, the probe would queue behind the work and a
        // balancer's check time out, taking a working process out of rotation (the last one,
        // when its peer just died); a query that succeeded just now says as much as the probe.
        // An idle pool probes: a refused connection never reaches Kysely's log.
        const pool = deps.databasePool();
        const busy = pool.waiting > 0 || (deps.engine === 'postgres' && pool.inUse >= deps.config.databasePoolSize);
        if (busy && performance.now() - deps.databaseAnswered() < RECENT_ANSWER_MS) return { status: 'ready', rate_limit: rateLimit };
        try {
          await sql`select 1`.execute(deps.db);
          return { status: 'ready', rate_limit: rateLimit };
        } catch {
          reply.header('retry-after', String(DATABASE_RETRY_AFTER_SECONDS));
          return reply.code(503).send({ status: 'database unavailable', rate_limit: rateLimit });
        }
      });
    },
  };
}

/**
 * The published descriptions of the API, the OpenAPI document and the GraphQL SDL: public,
 * like /healthz. They are the same for every caller and hold nothing of a workspace, and a
 * code generator reads them without a token. Each is built once per process.
 */
function publishedSurface(deps: Deps): SurfaceSpec {
  let sdl: string | undefined;
  return {
    render: renderPlainError,
    setup(scope) {
      // Readable from any origin (Swagger UI, an editor): these two documents only. They
      // need no credentials and hold nothing of a caller, so `*` gives nothing away.
      scope.addHook('onRequest', async (_request, reply) => {
        reply.header('access-control-allow-origin', '*');
      });
      for (const url of [OPENAPI_PATH, GRAPHQL_SDL_PATH]) {
        scope.options(url, async (request, reply) => {
          reply.header('allow', 'GET, HEAD, OPTIONS').header('access-control-allow-methods', 'GET, HEAD, OPTIONS').header('access-control-max-age', '86400');
          const asked = request.headers['access-control-request-headers'];
          if (typeof asked === 'string' && asked !== '') reply.header('access-control-allow-headers', asked).header('vary', 'Access-Control-Request-Headers');
          return reply.code(204).send();
        });
      }
      scope.get(OPENAPI_PATH, async (_request, reply) => reply.type('application/json').send(openApiText({ apiSpecMaxBytes: deps.config.apiSpecMaxBytes })));
      scope.get(GRAPHQL_SDL_PATH, async (_request, reply) => {
        sdl ??= `${printSchema(schema)}\n`;
        return reply.type('text/plain; charset=utf-8').send(sdl);
      });
    },
  };
}

export async function buildApp(deps: Deps): Promise<FastifyInstance> {
  // By name: the metrics' `surface` label.
  const named: Array<[string, SurfaceSpec]> = [
    ['health', healthSurface(deps)],
    ['published', publishedSurface(deps)],
    ['token', tokenSurface(deps)],
    ['jsonapi', jsonApiSurface(deps)],
    ['graphql', graphqlSurface(deps)],
    ['webhooks', webhookSurface(deps)],
    ['admin', adminSurface(deps)],
    ...(deps.config.console ? [['console', consoleSurface(deps)] as [string, SurfaceSpec]] : []),
  ];
  const surfaces = named.map(([, s]) => s);
  // What no surface's context takes (an unknown path, a URL the router cannot read, bytes
  // Node's parser refused) is answered in the shape of the surface whose prefix the path has.
  const ownerOf = (path: string) => surfaces.find((s) => s.prefix !== undefined && path.startsWith(s.prefix));
  const handlerFor = (path: string) => errorHandlerFor(ownerOf(path)?.render ?? renderPlainError);
  const app: FastifyInstance = Fastify({
    loggerInstance: requestLogger(deps.log),
    logController: new RequestLogController(),
    genReqId: requestId,
    bodyLimit: deps.config.bodyLimitBytes,
    // Our own keys of the querystring are bracketed literals (filter[name]); no nesting parser.
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 500 },
    // Requests already on an open connection while draining run normally (readiness says 503).
    return503OnClosing: false,
    forceCloseConnections: 'idle',
    frameworkErrors: (err, request, reply) => handlerFor(request.url)(err, request, reply),
    ...connectionOptions(deps.config, (target) => ownerOf(target)?.renderRaw),
  });

  app.decorateRequest('errorCode', undefined);
  registerConnectionHooks(app, deps);
  registerBodyParsers(app);
  registerHooks(app, deps);
  registerRequestMetrics(app, deps.metrics, (path) => named.find(([, s]) => s.prefix !== undefined && path.startsWith(s.prefix))?.[0]);
  registerRequestTracing(app, deps.tracing);
  // Until the database answers (and is migrated) only health is served; everything else is
  // the database-unavailable 503, in the shape of the surface asked.
  app.addHook('onRequest', async (request) => {
    const route = request.routeOptions.url ?? '';
    // The console's files need no database: its page loads and reports what the API answers.
    if (!deps.ready.value && !HEALTH_ROUTES.has(route) && !route.startsWith(CONSOLE_PATH)) throw databaseUnavailable();
  });

  for (const [name, s] of named) registerSurface(app, s, name);
  app.setErrorHandler(errorHandlerFor(renderPlainError));
  app.setNotFoundHandler((request, reply) => handlerFor(request.url)(new AppError('not_found', 'No such route or resource'), request, reply));
  await app.ready();
  return app;
}
