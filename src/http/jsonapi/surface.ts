import type { FastifyReply, FastifyRequest } from 'fastify';
import type { FastifyInstance } from 'fastify';
import type { Selectable } from 'kysely';
import type { ApiSpecTable, DashboardWidgetTable, DataModelFieldTable, DataModelTable, ExternalConnectorTable } from '../../db/tables.ts';
import type { Deps } from '../../deps.ts';
import {
  findOr404,
  parseFor,
  registerDeleteRoute,
  registerReadRoutes,
  registerWriteRoutes,
  rowOnly,
  sendDocument,
  writeOptions,
  type DeleteHandler,
} from './routes.ts';
import { authorize, typePermission } from '../../auth/access.ts';
import { rateLimitOf, rateUse } from '../../connectors/rate.ts';
import { AppError, invalidAt, invalidParam } from '../../errors.ts';
import { verifyConnector } from '../../connectors/verify.ts';
import { API_PREFIX, buildDocument } from './document.ts';
import { readAttributes } from './input.ts';
import { jsonApiContext } from './context.ts';
import type { SurfaceSpec } from '../surface.ts';
import { RESOURCE_TYPES } from '../../resources/types.ts';
import { dataModelType } from '../../resources/data_models/resource.ts';
import { dataModelFieldType } from '../../resources/data_model_fields/resource.ts';
import { createDataModel, deleteDataModel, patchDataModel } from '../../resources/data_models/service.ts';
import { createField, deleteField, patchField } from '../../resources/data_model_fields/service.ts';
import { externalConnectorType } from '../../resources/external_connectors/resource.ts';
import { createConnector, deleteConnector, patchConnector } from '../../resources/external_connectors/service.ts';
import { workflowType } from '../../resources/workflows/resource.ts';
import { builderStateInput, deleteWorkflow, saveBuilderState } from '../../resources/workflows/service.ts';
import { dashboardWidgetType } from '../../resources/dashboard_widgets/resource.ts';
import { createDashboardWidget, deleteDashboardWidget, patchDashboardWidget } from '../../resources/dashboard_widgets/service.ts';
import { workflowRunType } from '../../resources/workflow_runs/resource.ts';
import { cancelWorkflowRun, replayRun } from '../../resources/workflow_runs/service.ts';
import { bulkReplay, readReplayMeta } from '../../resources/workflow_runs/replay.ts';
import { apiSpecType } from '../../resources/api_specs/resource.ts';
import { createApiSpec, deleteApiSpec, patchApiSpec } from '../../resources/api_specs/service.ts';
import { providerRoutes } from './providers.ts';
import { writeInputs } from './writable.ts';
import { isObject, pointerToken } from '../../json.ts';
import { MAX_HEADERS } from '../../triggers/delivery-headers.ts';
import { testRun, testRunInput, WORKFLOW_FILE_MAX_CHARS, type TestRunInput } from '../../worker/test-run.ts';

/** The JSON:API surface with every resource type's routes. */
export function jsonApiSurface(deps: Deps): SurfaceSpec {
  const now = () => new Date(deps.clock());
  // An update's `existing` is the row findOr404 read with all its type's table's columns: its
  // handler names that table's row type (the write routes are generic over types, so they cannot).
  const inputs = writeInputs(deps.config.apiSpecMaxBytes);
  // Write routes run on deps.db, outside any transaction: PostgreSQL can build a field's index concurrently.
  const indexBuild = deps.engine === 'postgres' ? 'concurrent' : 'plain';
  return jsonApiContext(deps, (scope: FastifyInstance) => {
    for (const type of RESOURCE_TYPES.values()) registerReadRoutes(scope, deps, RESOURCE_TYPES, type);
    registerWriteRoutes(scope, deps, RESOURCE_TYPES, dataModelType, {
      input: inputs.data_model,
      create: rowOnly((db, principal, attrs) => createDataModel(db, principal, attrs, deps.config.quotas)),
      update: rowOnly((db, principal, existing: Selectable<DataModelTable>, attrs) => patchDataModel(db, principal, existing, attrs, now())),
    });
    registerWriteRoutes(scope, deps, RESOURCE_TYPES, dataModelFieldType, {
      input: inputs.data_model_field,
      create: rowOnly((db, principal, attrs) => createField(db, principal, attrs, indexBuild, deps.config.quotas)),
      update: rowOnly((db, principal, existing: Selectable<DataModelFieldTable>, attrs) => patchField(db, principal, existing, attrs, now(), indexBuild)),
    });
    const connectorOptions = { key: deps.connectorKey, allowPrivateEgress: deps.config.allowPrivateEgress };
    registerWriteRoutes(scope, deps, RESOURCE_TYPES, externalConnectorType, {
      input: inputs.external_connector,
      create: rowOnly((db, principal, attrs) => createConnector(db, principal, attrs, connectorOptions, deps.config.quotas)),
      update: rowOnly((db, principal, existing: Selectable<ExternalConnectorTable>, attrs) =>
        patchConnector(db, principal, existing, attrs, connectorOptions, now()),
      ),
    });
    const specOptions = {
      allowPrivateEgress: deps.config.allowPrivateEgress,
      maxBytes: deps.config.apiSpecMaxBytes,
      maxOperations: deps.config.apiSpecMaxOperations,
      importer: deps.specImporter,
    };
    registerWriteRoutes(scope, deps, RESOURCE_TYPES, apiSpecType, {
      input: inputs.api_spec,
      create: (db, principal, attrs) => createApiSpec(db, principal, attrs, specOptions),
      update: (db, principal, existing: Selectable<ApiSpecTable>, attrs) => patchApiSpec(db, principal, existing, attrs, specOptions, now()),
      // The document travels JSON-escaped inside a JSON:API document: room for its escapes.
      bodyLimit: Math.max(deps.config.bodyLimitBytes, 2 * deps.config.apiSpecMaxBytes + 65_536),
    });
    registerWriteRoutes(scope, deps, RESOURCE_TYPES, dashboardWidgetType, {
      input: inputs.dashboard_widget,
      create: rowOnly((db, principal, attrs) => createDashboardWidget(db, principal, attrs)),
      update: rowOnly((db, principal, existing: Selectable<DashboardWidgetTable>, attrs) => patchDashboardWidget(db, principal, existing, attrs, now())),
    });
    providerRoutes(scope);

    // Every type declared deletable has its delete here, and only those (docs/api.md, "Deleting").
    const deletes: Record<string, DeleteHandler> = {
      workflow: (db, principal, id) => deleteWorkflow(db, principal, id, now()),
      external_connector: deleteConnector,
      api_spec: deleteApiSpec,
      data_model: (db, principal, id) => deleteDataModel(db, principal, id, indexBuild),
      data_model_field: (db, principal, id) => deleteField(db, principal, id, indexBuild),
      dashboard_widget: deleteDashboardWidget,
    };
    for (const type of RESOURCE_TYPES.values()) {
      const remove = deletes[type.type];
      if ((type.deletable === true) !== (remove !== undefined)) throw new Error(`${type.type}: its deletable flag and its delete handler disagree`);
      if (remove) registerDeleteRoute(scope, deps, type, remove);
    }

    // A cheap call through the driver; the connector becomes verified or failing.
    scope.post(`${API_PREFIX}/external_connectors/:id/verify`, writeOptions(externalConnectorType.type), async (request, reply) => {
      const q = parseFor(request, RESOURCE_TYPES, externalConnectorType, false);
      const principal = request.principal!;
      const existing = await findOr404(deps.db, externalConnectorType, principal, (request.params as { id: string }).id);
      authorize(principal, 'external_connector.verify');
      const row = await verifyConnector(deps.connectors, deps.db, principal.workspaceId, existing.id, deps.clock);
      if (!row) throw new AppError('not_found', 'No external_connector with this id');
      const self = `${API_PREFIX}/external_connectors/${row.id}`;
      return sendDocument(reply, 200, await buildDocument(deps.db, RESOURCE_TYPES, principal, externalConnectorType, row, q, { links: { self }, now: now() }));
    });

    // The connector's rate budget as the calls through it count it, read without counting.
    scope.get(
      `${API_PREFIX}/external_connectors/:id/rate_limit`,
      { config: { permission: typePermission(externalConnectorType.type, 'read'), rateLimit: 'account' } },
      async (request, reply) => {
        const principal = request.principal!;
        const row = await findOr404(deps.db, externalConnectorType, principal, (request.params as { id: string }).id);
        const self = `${API_PREFIX}/external_connectors/${row.id}/rate_limit`;
        const attributes = await rateLimitAttributes(deps, row.id, row.config);
        return sendDocument(reply, 200, { jsonapi: { version: '1.1' }, data: { type: 'connector_rate_limit', id: row.id, attributes }, links: { self } });
      },
    );

    // The whole graph in one save; new triggers' tokens are shown this once, in meta.
    scope.post(`${API_PREFIX}/workflows/save_builder_state`, writeOptions(workflowType.type), async (request, reply) => {
      const q = parseFor(request, RESOURCE_TYPES, workflowType, false);
      const attrs = readAttributes(request.body, { type: 'workflow_builder_state' }, builderStateInput);
      const { row, triggerTokens } = await saveBuilderState(deps.db, request.principal!, attrs, now(), deps.config);
      const self = `${API_PREFIX}/workflows/${row.id}`;
      reply.header('location', self);
      return sendDocument(
        reply,
        201,
        await buildDocument(deps.db, RESOURCE_TYPES, request.principal!, workflowType, row, q, {
          links: { self },
          // Where a provider posts instead (`<relay_url>/hooks/<token>`), when this service knows its relay.
          meta: { trigger_tokens: triggerTokens, ...(deps.relay.url === undefined ? {} : { relay_url: deps.relay.url }) },
          now: new Date(deps.clock()),
        }),
      );
    });

    // A dry run of a workflow version (or of an unsaved workflow_file) on a given payload: nothing is stored, the answer is all there is.
    // A file's text may be escaped in JSON to several times its length.
    const testRunBodyLimit = Math.max(deps.config.bodyLimitBytes, 2 * deps.config.webhookMaxBodyBytes + 4 * WORKFLOW_FILE_MAX_CHARS + 65_536);
    const testRunOf = (workflowId: (request: FastifyRequest) => string | null) => async (request: FastifyRequest, reply: FastifyReply) => {
      const input = readTestRunDocument(request.body, deps.config.webhookMaxBodyBytes);
      const result = await testRun(deps, request.principal!, workflowId(request), input, request.traceSpan);
      const { id, ...attributes } = result;
      return sendDocument(reply, 200, { data: { type: 'workflow_test_run', id, attributes } });
    };
    const testRunConfig = { config: { permission: 'workflow.test_run', rateLimit: 'account', idempotent: true }, bodyLimit: testRunBodyLimit } as const;
    scope.post(
      `${API_PREFIX}/workflows/:id/test_run`,
      testRunConfig,
      testRunOf((request) => (request.params as { id: string }).id),
    );
    // A workflow not saved yet: its workflow_file is all there is to test.
    scope.post(
      `${API_PREFIX}/workflows/test_run`,
      testRunConfig,
      testRunOf(() => null),
    );

    scope.post(`${API_PREFIX}/workflow_runs/:id/replay`, writeOptions(workflowRunType.type), async (request, reply) => {
      const q = parseFor(request, RESOURCE_TYPES, workflowRunType, false);
      const { version } = readReplayMeta(request.body, false);
      const row = await replayRun(deps, request.principal!, (request.params as { id: string }).id, version, request.traceSpan);
      const self = `${API_PREFIX}/workflow_runs/${row.id}`;
      reply.header('location', self);
      return sendDocument(
        reply,
        201,
        await buildDocument(deps.db, RESOURCE_TYPES, request.principal!, workflowRunType, row, q, { links: { self }, now: now() }),
      );
    });

    scope.post(`${API_PREFIX}/workflow_runs/:id/cancel`, writeOptions(workflowRunType.type), async (request, reply) => {
      const q = parseFor(request, RESOURCE_TYPES, workflowRunType, false);
      const row = await cancelWorkflowRun(deps, request.principal!, (request.params as { id: string }).id);
      const self = `${API_PREFIX}/workflow_runs/${row.id}`;
      return sendDocument(
        reply,
        200,
        await buildDocument(deps.db, RESOURCE_TYPES, request.principal!, workflowRunType, row, q, { links: { self }, now: now() }),
      );
    });

    // Bulk replay: the list's filter[...] parameters pick the runs; the body's meta the version and limit.
    scope.post(`${API_PREFIX}/workflow_runs/replay`, writeOptions(workflowRunType.type), async (request, reply) => {
      for (const name of Object.keys(request.query as object)) {
        if (!name.startsWith('filter['))
          throw invalidParam(name, 'A bulk replay takes filter[...] parameters only; its limit and version go in the body, meta.limit and meta.version');
      }
      const q = parseFor(request, RESOURCE_TYPES, workflowRunType, true);
      if (q.filter.length === 0) {
        throw new AppError(
          'invalid_request',
          'A bulk replay needs at least one filter[...] parameter, so that a whole workspace is never replayed by accident',
          {
            source: { parameter: 'filter' },
          },
        );
      }
      const meta = readReplayMeta(request.body, true);
      const filter = q.filter.map(({ attr, op, value }) => ({ attr, op, value }));
      const result = await bulkReplay(deps, request.principal!.workspaceId, filter, meta, request.traceSpan);
      return sendDocument(reply, result.replayed > 0 ? 201 : 200, {
        jsonapi: { version: '1.1' },
        data: result.run_ids.map((id) => ({ type: workflowRunType.type, id })),
        meta: { replayed: result.replayed, has_more: result.has_more },
        links: { self: `${API_PREFIX}/workflow_runs/replay` },
      });
    });
  });
}

/** A connector_rate_limit's attributes: without a rate_limit, limited is false and the rest null (no window is counted). */
async function rateLimitAttributes(deps: Deps, connectorId: string, config: Record<string, unknown> | null): Promise<Record<string, unknown>> {
  const limit = rateLimitOf(config);
  if (limit === undefined) return { limited: false, requests: null, per_seconds: null, used: null, remaining: null, resets_at: null };
  const use = await rateUse(deps.connectors.counter, connectorId, limit, deps.clock());
  return {
    limited: true,
    requests: limit.requests,
    per_seconds: limit.perSeconds,
    used: use.used,
    remaining: use.remaining,
    resets_at: use.resetsAt.toISOString(),
  };
}

// An HTTP header name (RFC 9110 token); a value is one line of text.
const HEADER_NAME_RE = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const BAD_HEADER_VALUE_RE = /[\r\n\0]/;

/** A test run's `headers`: an object of string values, as a delivery's headers could be; at most MAX_HEADERS of them. */
function readSampleHeaders(headers: unknown): Record<string, string> {
  const at = '/data/attributes/headers';
  if (!isObject(headers)) throw invalidAt(at, 'headers must be an object of header names to string values, e.g. {"X-GitHub-Event": "push"}');
  const names = Object.keys(headers);
  if (names.length > MAX_HEADERS) throw invalidAt(at, `headers may hold at most ${MAX_HEADERS} headers, as a run keeps at most that many`);
  const out: Record<string, string> = {};
  for (const name of names) {
    const value = headers[name];
    const pointer = `${at}/${pointerToken(name)}`;
    if (!HEADER_NAME_RE.test(name)) throw invalidAt(pointer, "a header name is letters, digits and !#$%&'*+.^_`|~- only");
    if (typeof value !== 'string') throw invalidAt(pointer, 'a header value must be a string');
    if (BAD_HEADER_VALUE_RE.test(value)) throw invalidAt(pointer, 'a header value must not hold line breaks or NUL');
    Object.defineProperty(out, name, { value, enumerable: true, writable: true, configurable: true });
  }
  return out;
}

/**
 * A workflow_test_run document: `payload` is any JSON (bounded as a webhook delivery's body
 * is), the other attributes are checked by readAttributes.
 */
/** A test run's sample deliveries for its wait_for_delivery steps: `{<step key>: {payload, headers?}}`. */
function readSampleDeliveries(v: unknown, maxPayloadBytes: number): NonNullable<TestRunInput['deliveries']> {
  const at = '/data/attributes/deliveries';
  if (!isObject(v)) throw invalidAt(at, 'deliveries must be an object of step key: {payload, headers}');
  const keys = Object.keys(v);
  if (keys.length > 100) throw invalidAt(at, 'deliveries may name at most 100 steps');
  const out: NonNullable<TestRunInput['deliveries']> = {};
  for (const key of keys) {
    const d = v[key];
    const kat = `${at}/${key.replaceAll('~', '~0').replaceAll('/', '~1')}`;
    if (!isObject(d) || !Object.hasOwn(d, 'payload')) throw invalidAt(kat, 'a sample delivery must be an object {payload, headers?}');
    for (const k of Object.keys(d))
      if (k !== 'payload' && k !== 'headers') throw invalidAt(`${kat}/${k}`, `${k} is not a member of a sample delivery (allowed: payload, headers)`);
    if (Buffer.byteLength(JSON.stringify(d.payload)) > maxPayloadBytes)
      throw invalidAt(`${kat}/payload`, `payload must be at most ${maxPayloadBytes} bytes as JSON`);
    const h = d.headers === undefined || d.headers === null ? undefined : readSampleHeaders(d.headers);
    Object.defineProperty(out, key, { value: { payload: d.payload, ...(h === undefined ? {} : { headers: h }) }, enumerable: true });
  }
  return out;
}

function readTestRunDocument(body: unknown, maxPayloadBytes: number): TestRunInput {
  const data = isObject(body) ? body.data : undefined;
  const attributes = isObject(data) ? data.attributes : undefined;
  if (!isObject(body) || !isObject(data) || !isObject(attributes)) {
    readAttributes(body, { type: 'workflow_test_run' }, testRunInput);
    throw invalidAt('/data/attributes', 'attributes must be an object with a payload');
  }
  const { payload, headers, deliveries, ...rest } = attributes;
  const attrs = readAttributes({ ...body, data: { ...data, attributes: rest } }, { type: 'workflow_test_run' }, testRunInput);
  if (!Object.hasOwn(attributes, 'payload')) throw invalidAt('/data/attributes/payload', 'payload is required: the JSON a trigger would deliver');
  if (Buffer.byteLength(JSON.stringify(payload)) > maxPayloadBytes)
    throw invalidAt('/data/attributes/payload', `payload must be at most ${maxPayloadBytes} bytes as JSON, as a webhook delivery's body`);
  const sampleHeaders = Object.hasOwn(attributes, 'headers') && headers !== null ? readSampleHeaders(headers) : undefined;
  const samples = deliveries === undefined || deliveries === null ? undefined : readSampleDeliveries(deliveries, maxPayloadBytes);
  return {
    payload,
    ...(samples === undefined ? {} : { deliveries: samples }),
    ...(sampleHeaders === undefined ? {} : { headers: sampleHeaders }),
    ...(attrs.delivery_id === undefined ? {} : { delivery_id: attrs.delivery_id as string | null }),
    version: attrs.version as number | undefined,
    ...(attrs.workflow_file === undefined ? {} : { workflow_file: attrs.workflow_file as string }),
    trigger_key: attrs.trigger_key as string | null | undefined,
    call: attrs.call as TestRunInput['call'],
  };
}
