/**
 * buildApp(deps): the Fastify instance with every surface. No I/O happens at import time;
 * main.ts (or a test) creates the deps, builds the app and listens.
 */
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyRequest } from 'fastify';
import { sql } from 'kysely';
import type { Deps } from './deps.ts';
import { uuidv7 } from './ids.ts';
import { AppError } from './errors.ts';
import { registerBodyParsers } from './http/body.ts';
import { registerHooks } from './http/hooks.ts';
import { connectionOptions, registerConnectionHooks } from './http/connections.ts';
import { renderError } from './http/render-error.ts';
import { registerTokenRoute } from './auth/token-route.ts';
import { registerAdminRoutes } from './admin/routes.ts';
import { registerJsonApiRoutes } from './resources/routes.ts';
import { registerGraphqlRoute } from './graphql/route.ts';

const REQUEST_ID_RE = /^[A-Za-z0-9._:-]{1,128}$/;

/** The webhook path carries a secret token: keep it out of every log line. */
export function redactUrl(url: string): string {
  return url.replace(/(\/api\/v1\/webhooks\/)(?:[^/?]+\/)?[^/?]+/, '$1[redacted]');
}

export async function buildApp(deps: Deps): Promise<FastifyInstance> {
  const loggerInstance: FastifyBaseLogger = deps.log.child({}, {
    serializers: {
      req: (req: FastifyRequest) => ({ method: req.method, url: redactUrl(req.url), remoteAddress: req.ip }),
    },
  });
  const app: FastifyInstance = Fastify({
    loggerInstance,
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID_RE.test(given) ? given : uuidv7();
    },
    bodyLimit: deps.config.bodyLimitBytes,
    // Our own keys of the querystring are bracketed literals (filter[name]); no nesting parser.
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 500 },
    // Requests already on an open connection while draining run normally (readiness says 503).
    return503OnClosing: false,
    forceCloseConnections: 'idle',
    ...connectionOptions(deps.config),
  });

  registerConnectionHooks(app, deps);
  registerBodyParsers(app);
  registerHooks(app, deps);
  app.setErrorHandler((err, request, reply) => renderError(err, request, reply));
  app.setNotFoundHandler((request, reply) => renderError(new AppError('not_found', 'No such route or resource'), request, reply));

  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (_request, reply) => {
    if (deps.draining.value) return reply.code(503).send({ status: 'draining' });
    try {
      await sql`select 1`.execute(deps.db);
      return { status: 'ready' };
    } catch {
      return reply.code(503).send({ status: 'database unavailable' });
    }
  });

  registerTokenRoute(app, deps);
  registerJsonApiRoutes(app, deps);
  registerGraphqlRoute(app, deps);
  registerAdminRoutes(app, deps);
  await app.ready();
  return app;
}
