/**
 * The admin API surface (/admin/v1): what the `tributary` CLI talks to. Bearer admin
 * token on every route, plain JSON in and out ({"data": ...}); errors use the JSON:API
 * error shape.
 */
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { Deps } from '../deps.ts';
import { AppError } from '../errors.ts';
import * as admin from './service.ts';
import { sweepExclusive } from '../maintenance/sweep.ts';
import { registerFactsAdminRoutes } from './facts-routes.ts';
import { renderJsonApiError } from '../http/jsonapi/errors.ts';
import type { SurfaceSpec } from '../http/surface.ts';
import { authenticateAdmin } from './admin-auth.ts';
import { adminCancelRun, adminFindRun, adminListRuns, adminReplayRun } from '../resources/workflow_runs/service.ts';
import { adminBulkReplay, adminReplayVersion } from '../resources/workflow_runs/replay.ts';

type Body = Record<string, unknown>;

function body(raw: unknown): Body {
  if (raw === undefined || raw === null) return {};
  if (typeof raw !== 'object' || Array.isArray(raw) || Buffer.isBuffer(raw)) throw new AppError('bad_request', 'The body must be a JSON object');
  return raw as Body;
}

function send(reply: FastifyReply, status: number, data: unknown): FastifyReply {
  return reply.code(status).type('application/json').send(JSON.stringify({ data }));
}

export function adminSurface(deps: Deps): SurfaceSpec {
  return {
    render: renderJsonApiError,
    setup(scope) {
      // The authenticator: the admin token, before anything else is looked at.
      scope.addHook('onRequest', async (request) => authenticateAdmin(deps.adminToken, request.headers.authorization));
      registerAdminRoutes(scope, deps);
    },
  };
}

/** A route with `:id` in its path: Fastify gives every path parameter as a string. */
type ById = { Params: { id: string } };

function registerAdminRoutes(app: FastifyInstance, deps: Deps): void {
  const p = '/admin/v1';
  app.post(`${p}/organizations`, async (req, reply) => send(reply, 201, await admin.createOrganization(deps.db, body(req.body))));
  app.post(`${p}/workspaces`, async (req, reply) => send(reply, 201, await admin.createWorkspace(deps.db, body(req.body))));
  app.post(`${p}/users`, async (req, reply) => send(reply, 201, await admin.createUser(deps.db, body(req.body))));
  app.post(`${p}/memberships`, async (req, reply) => send(reply, 201, await admin.addMember(deps.db, body(req.body))));
  app.post<ById>(`${p}/memberships/:id/deactivate`, async (req, reply) =>
    send(reply, 200, await admin.deactivateMember(deps.db, req.params.id, new Date(deps.clock()))),
  );
  app.post(`${p}/credentials`, async (req, reply) => send(reply, 201, await admin.createCredential(deps.db, body(req.body))));
  app.patch<ById>(`${p}/credentials/:id`, async (req, reply) =>
    send(reply, 200, await admin.updateCredential(deps.db, req.params.id, body(req.body), new Date(deps.clock()))),
  );
  app.post(`${p}/widgets`, async (req, reply) => send(reply, 201, await admin.createWidget(deps.db, body(req.body))));
  app.delete<ById>(`${p}/widgets/:id`, async (req, reply) => send(reply, 200, await admin.deleteWidget(deps.db, req.params.id)));
  app.post(`${p}/sweep`, async (_req, reply) => {
    const result = await sweepExclusive(deps.db, {
      now: new Date(deps.clock()),
      guardDays: deps.config.deliveryGuardDays,
      runRetentionDays: deps.config.runRetentionDays,
    });
    if (!result) throw new AppError('conflict', 'A sweep is already running (the nightly one, or another tributary sweep); run it again when that one is done');
    return send(reply, 200, result);
  });
  const lists: Array<[string, admin.ListKind]> = [
    ['organizations', 'organizations'],
    ['workspaces', 'workspaces'],
    ['users', 'users'],
    ['memberships', 'memberships'],
    ['credentials', 'credentials'],
    ['widgets', 'widgets'],
    ['data-models', 'data_models'],
  ];
  for (const [path, kind] of lists) {
    app.get(`${p}/${path}`, async (req, reply) => {
      const result = await admin.list(deps.db, kind, req.query as admin.ListQuery);
      return reply.code(200).type('application/json').send(JSON.stringify(result));
    });
  }
  app.get<{ Querystring: Record<string, unknown> }>(`${p}/runs`, async (req, reply) =>
    reply
      .code(200)
      .type('application/json')
      .send(JSON.stringify(await adminListRuns(deps, req.query))),
  );
  app.get<ById>(`${p}/runs/:id`, async (req, reply) => send(reply, 200, await adminFindRun(deps, req.params.id)));
  app.post<ById>(`${p}/runs/:id/replay`, async (req, reply) =>
    send(reply, 201, await adminReplayRun(deps, req.params.id, adminReplayVersion(body(req.body)), req.traceSpan)),
  );
  app.post<ById>(`${p}/runs/:id/cancel`, async (req, reply) => send(reply, 200, await adminCancelRun(deps, req.params.id)));
  app.post(`${p}/runs/replay`, async (req, reply) => {
    const result = await adminBulkReplay(deps, body(req.body), req.traceSpan);
    return send(reply, result.replayed > 0 ? 201 : 200, result);
  });
  app.get(`${p}/whoami`, async (req, reply) => send(reply, 200, await admin.whoami(deps.db, (req.query as { client_id?: unknown }).client_id)));
  registerFactsAdminRoutes(app, deps);
}
