/**
 * The OpenAPI 3.1 document of the API Tributary serves: GET /api/json/v1/openapi.json.
 * Resource schemas and query parameters are generated from the type registry and the query
 * parser's own rules, so the document describes what is served; a test compares its
 * operations with the routes Fastify registered, both ways. Built once per process.
 */
import { ERROR_STATUS, type ErrorCode } from '../../errors.ts';
import type { InputField, InputSchema } from '../../input.ts';
import type { AttrSpec, ResourceType, TypeRegistry } from '../../resources/resource.ts';
import { SCOPES } from '../../auth/tokens.ts';
import { RESOURCE_TYPES } from '../../resources/types.ts';
import { builderStateInput } from '../../resources/workflows/service.ts';
import { DEFAULT_WEBHOOK_ACCEPT, KEY_RE, WEBHOOK_ACCEPT } from '../../workflows/definition.ts';
import { CATCH_UP, DEFAULT_CATCH_UP, DEFAULT_TIMEZONE } from '../../triggers/schedule.ts';
import { testRunInput } from '../../worker/test-run.ts';
import { REPLAY_VERSIONS, BULK_REPLAY_MAX } from '../../resources/workflow_runs/replay.ts';
import { API_PREFIX } from './document.ts';
import { JSONAPI_MEDIA_TYPE } from './errors.ts';
import { writeInputs } from './writable.ts';
import { QUERY_LIMITS, canFilter, canSort, filterOperators } from './query.ts';
import { MAX_HEADERS } from '../../triggers/delivery-headers.ts';

export const OPENAPI_PATH = `${API_PREFIX}/openapi.json`;
export const GRAPHQL_SDL_PATH = '/api/graphql/schema.graphql';
export const TOKEN_PATH = '/api/v1/oauth/token';

type Schema = Record<string, unknown>;
type Operation = Record<string, unknown>;
type PathItem = Record<string, Operation>;

/** What the document needs of the server's configuration: limits that shape the input schemas. */
export interface OpenApiOptions {
  apiSpecMaxBytes: number;
}

/** The writable types' inputs, as surface.ts registers them (writable.ts). */
function writableInputs(opts: OpenApiOptions): ReadonlyMap<string, InputSchema> {
  return new Map(Object.entries(writeInputs(opts.apiSpecMaxBytes)));
}

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const jsonApiContent = (schema: Schema) => ({ content: { [JSONAPI_MEDIA_TYPE]: { schema } } });
const nullable = (s: Schema): Schema => {
  if (s.enum) return { ...s, type: [s.type, 'null'], enum: [...(s.enum as unknown[]), null] };
  if (typeof s.type === 'string') return { ...s, type: [s.type, 'null'] };
  return s;
};

// ---------------------------------------------------------------- schemas of a resource type

function attributeSchema(def: AttrSpec): Schema {
  const base: Schema = (() => {
    switch (def.kind) {
      case 'string':
        return { type: 'string' };
      case 'integer':
        return { type: 'integer' };
      case 'boolean':
        return { type: 'boolean' };
      case 'datetime':
        return { type: 'string', format: 'date-time' };
      case 'uuid':
        return { type: 'string', format: 'uuid' };
      case 'enum':
        return { type: 'string', enum: [...(def.values ?? [])] };
      case 'json':
        return {};
      case 'string_array':
        return { type: 'array', items: def.values ? { type: 'string', enum: [...def.values] } : { type: 'string' } };
    }
  })();
  return def.nullable ? nullable(base) : base;
}

function inputFieldSchema(f: InputField): Schema {
  const base: Schema = (() => {
    switch (f.kind) {
      case 'string':
        return { type: 'string', maxLength: f.max ?? 1000, ...(f.pattern ? { pattern: f.pattern.source } : {}) };
      case 'integer':
        return { type: 'integer', ...(f.min === undefined ? {} : { minimum: f.min }), ...(f.max === undefined ? {} : { maximum: f.max }) };
      case 'boolean':
        return { type: 'boolean' };
      case 'enum':
        return { type: 'string', enum: [...f.values] };
      case 'object':
        return f.schema ? { ...f.schema } : { type: 'object' };
      case 'id':
        return { type: 'string', format: 'uuid' };
      case 'array':
        return { type: 'array', maxItems: f.maxItems };
    }
  })();
  return f.nullable ? nullable(base) : base;
}

/** A write's attributes: on create the required ones are required, on update none is. */
function inputAttributes(input: InputSchema, create: boolean): Schema {
  const properties = Object.fromEntries(Object.entries(input).map(([name, f]) => [name, inputFieldSchema(f)]));
  const required = create
    ? Object.entries(input)
        .filter(([, f]) => f.required)
        .map(([name]) => name)
    : [];
  return { type: 'object', properties, ...(required.length > 0 ? { required } : {}) };
}

const identifier = (type: string): Schema => ({
  type: 'object',
  required: ['type', 'id'],
  properties: { type: { const: type }, id: { type: 'string' } },
});

function resourceSchemas(type: ResourceType, input: InputSchema | undefined): Record<string, Schema> {
  const t = type.type;
  const relationships = Object.fromEntries(
    Object.entries(type.relationships).map(([name, rel]) => [
      name,
      {
        type: 'object',
        properties: {
          data: rel.kind === 'one' ? { oneOf: [identifier(rel.type), { type: 'null' }] } : { type: 'array', items: identifier(rel.type) },
          links: { type: 'object', additionalProperties: { type: 'string' } },
          meta: { type: 'object' },
        },
      },
    ]),
  );
  const schemas: Record<string, Schema> = {
    [`${t}_attributes`]: {
      type: 'object',
      description: `The public attributes of ${t}; a sparse fieldset (fields[${t}]) returns fewer.`,
      properties: Object.fromEntries(Object.entries(type.attributes).map(([name, def]) => [name, attributeSchema(def)])),
    },
    [t]: {
      type: 'object',
      required: ['type', 'id'],
      properties: {
        type: { const: t },
        id: { type: 'string' },
        attributes: ref(`${t}_attributes`),
        relationships: { type: 'object', properties: relationships },
        links: { $ref: '#/components/schemas/links' },
        meta: { type: 'object' },
      },
    },
    [`${t}_document`]: document({ ...ref(t) }),
    [`${t}_list`]: document({ type: 'array', items: ref(t) }),
  };
  if (input) {
    schemas[`${t}_create`] = writeDocument(t, inputAttributes(input, true), false);
    schemas[`${t}_update`] = writeDocument(t, inputAttributes(input, false), true);
  }
  return schemas;
}

function document(data: Schema): Schema {
  return {
    type: 'object',
    required: ['data'],
    properties: {
      data,
      included: { type: 'array', items: { $ref: '#/components/schemas/any_resource' } },
      links: { $ref: '#/components/schemas/links' },
      meta: { type: 'object' },
      jsonapi: { type: 'object', properties: { version: { type: 'string' } } },
    },
  };
}

function writeDocument(type: string, attributes: Schema, withId: boolean): Schema {
  return {
    type: 'object',
    required: ['data'],
    properties: {
      data: {
        type: 'object',
        required: withId ? ['type', 'id'] : ['type'],
        properties: { type: { const: type }, ...(withId ? { id: { type: 'string' } } : {}), attributes, relationships: { type: 'object' } },
      },
    },
  };
}

/** The JSON:API error document, with the closed set of codes and their statuses. */
function errorSchemas(): Record<string, Schema> {
  return {
    error: {
      type: 'object',
      required: ['errors'],
      properties: {
        errors: {
          type: 'array',
          items: {
            type: 'object',
            required: ['status', 'code', 'title'],
            properties: {
              id: { type: 'string', description: 'The request id, as in the X-Request-Id header and the logs' },
              status: { type: 'string' },
              code: { type: 'string', enum: Object.keys(ERROR_STATUS) },
              title: { type: 'string' },
              detail: { type: 'string' },
              source: { type: 'object', properties: { pointer: { type: 'string' }, parameter: { type: 'string' }, header: { type: 'string' } } },
            },
          },
        },
        jsonapi: { type: 'object', properties: { version: { type: 'string' } } },
      },
    },
    links: { type: 'object', additionalProperties: { type: ['string', 'null'] } },
    any_resource: {
      type: 'object',
      required: ['type', 'id'],
      properties: { type: { type: 'string' }, id: { type: 'string' }, attributes: { type: 'object' }, relationships: { type: 'object' } },
    },
  };
}

/** One response per error status: its description names the codes answered with it. */
function errorResponses(): Record<string, unknown> {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const [code, status] of Object.entries(ERROR_STATUS) as [ErrorCode, number][]) byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  return Object.fromEntries(
    [...byStatus].map(([status, codes]) => [
      `error_${status}`,
      {
        description: `Error document; code ${codes.join(' | ')}`,
        ...(status === 429 || status === 503 ? { headers: { 'Retry-After': { schema: { type: 'integer' }, description: 'Seconds to wait' } } } : {}),
        ...jsonApiContent(ref('error')),
      },
    ]),
  );
}

const errors = (...statuses: number[]) => Object.fromEntries(statuses.map((s) => [String(s), { $ref: `#/components/responses/error_${s}` }]));
/** What any authenticated JSON:API request can be answered besides its own errors. */
const COMMON_ERRORS = [400, 401, 403, 406, 429, 503];
const WRITE_ERRORS = [...COMMON_ERRORS, 404, 409, 413, 415, 422];

// ---------------------------------------------------------------- paths of a resource type

function queryParam(name: string, description: string, schema: Schema = { type: 'string' }): Schema {
  return { name, in: 'query', required: false, description, schema };
}

function includeAndFields(type: ResourceType, registry: TypeRegistry): Schema[] {
  const rels = Object.keys(type.relationships);
  const fieldTypes = [...new Set([type.type, ...Object.values(type.relationships).map((r) => r.type)])];
  return [
    ...(rels.length > 0
      ? [
          queryParam(
            'include',
            `Comma-separated relationship paths (dotted, at most ${QUERY_LIMITS.maxIncludeDepth} deep, at most ${QUERY_LIMITS.maxIncludePaths}) of: ${rels.join(', ')}`,
          ),
        ]
      : []),
    ...fieldTypes.map((t) => {
      const target = registry.get(t)!;
      return queryParam(
        `fields[${t}]`,
        `Sparse fieldset of ${t}: comma-separated names of ${[...Object.keys(target.attributes), ...Object.keys(target.relationships)].join(', ')}`,
      );
    }),
  ];
}

/** filter[attr][op] for every filterable attribute and each operator it takes; filter[attr] is eq. */
function filterParams(type: ResourceType): Schema[] {
  const params: Schema[] = [];
  for (const [attr, def] of Object.entries(type.attributes)) {
    if (!canFilter(def)) continue;
    for (const op of filterOperators(def)) {
      const value =
        op === 'is_null'
          ? { type: 'boolean' }
          : op === 'in'
            ? { type: 'string', description: `comma-separated, at most ${QUERY_LIMITS.maxInValues}` }
            : def.kind === 'string_array'
              ? { type: 'string' }
              : attributeSchema({ ...def, nullable: false });
      const text = op === 'in' ? `${attr} is one of the comma-separated values` : `${attr} ${op}`;
      if (op === 'eq') params.push(queryParam(`filter[${attr}]`, `${attr} equals (same as filter[${attr}][eq])`, value));
      params.push(queryParam(`filter[${attr}][${op}]`, text, value));
    }
  }
  return params;
}

function listParams(type: ResourceType): Schema[] {
  const sortable = Object.entries(type.attributes)
    .filter(([, def]) => canSort(def))
    .map(([name]) => name);
  const { defaultLimit, maxLimit, maxOffset, maxSortKeys } = QUERY_LIMITS;
  return [
    ...filterParams(type),
    ...(sortable.length > 0
      ? [queryParam('sort', `Comma-separated, at most ${maxSortKeys}, "-" for descending (default -inserted_at) of: ${sortable.join(', ')}`)]
      : []),
    queryParam('page[limit]', `Page size (default ${defaultLimit})`, { type: 'integer', minimum: 1, maximum: maxLimit }),
    queryParam('page[offset]', 'Offset paging; not with page[after] or page[before]', { type: 'integer', minimum: 0, maximum: maxOffset }),
    queryParam('page[after]', 'Cursor paging: the meta.page.next_cursor of a page', { type: 'string' }),
    queryParam('page[before]', 'Cursor paging: the meta.page.prev_cursor of a page', { type: 'string' }),
    queryParam('page[count]', 'true adds meta.page.total', { type: 'boolean' }),
  ];
}

const idParam = { name: 'id', in: 'path', required: true, schema: { type: 'string', format: 'uuid' } };
const idempotencyKey = {
  name: 'Idempotency-Key',
  in: 'header',
  required: false,
  description: 'A retried write with the same key answers the first answer',
  schema: { type: 'string', maxLength: 255 },
};

function resourcePaths(type: ResourceType, registry: TypeRegistry, input: InputSchema | undefined): Record<string, PathItem> {
  const t = type.type;
  const collection = `${API_PREFIX}/${type.path}`;
  const single = `${collection}/{id}`;
  const read = includeAndFields(type, registry);
  const ok = (status: number, schema: string, description: string) => ({ [status]: { description, ...jsonApiContent(ref(schema)) } });
  const paths: Record<string, PathItem> = {
    [collection]: {
      get: {
        operationId: `list_${type.path}`,
        tags: [t],
        summary: `List ${t} resources`,
        parameters: [...listParams(type), ...read],
        responses: { ...ok(200, `${t}_list`, `A page of ${t}`), ...errors(...COMMON_ERRORS) },
      },
    },
    [single]: {
      get: {
        operationId: `get_${t}`,
        tags: [t],
        summary: `Read one ${t}`,
        parameters: [idParam, ...read],
        responses: { ...ok(200, `${t}_document`, `The ${t}`), ...errors(...COMMON_ERRORS, 404) },
      },
    },
  };
  if (input) {
    paths[collection]!.post = {
      operationId: `create_${t}`,
      tags: [t],
      summary: `Create a ${t}`,
      parameters: [idempotencyKey, ...read],
      requestBody: { required: true, ...jsonApiContent(ref(`${t}_create`)) },
      responses: { ...ok(201, `${t}_document`, `Created; Location names it`), ...errors(...WRITE_ERRORS) },
    };
    paths[single]!.patch = {
      operationId: `update_${t}`,
      tags: [t],
      summary: `Update a ${t}: the attributes given change`,
      parameters: [idParam, idempotencyKey, ...read],
      requestBody: { required: true, ...jsonApiContent(ref(`${t}_update`)) },
      responses: { ...ok(200, `${t}_document`, `Updated`), ...errors(...WRITE_ERRORS) },
    };
  }
  if (type.deletable) {
    paths[single]!.delete = {
      operationId: `delete_${t}`,
      tags: [t],
      summary: `Delete a ${t} (docs/api.md, "Deleting")`,
      parameters: [idParam, idempotencyKey],
      responses: { 204: { description: 'Deleted; a read or DELETE of the id is 404 from now on' }, ...errors(...COMMON_ERRORS, 404, 409) },
    };
  }
  return paths;
}

// ---------------------------------------------------------------- the special operations

// ---------------------------------------------------------------- workflow triggers

/** A trigger's members as a save takes them (workflows/definition.ts) and as the workflow's `triggers` shows them. */
function triggerSchemas(): Record<string, Schema> {
  const key = { type: 'string', pattern: KEY_RE.source };
  const uuid = { type: 'string', format: 'uuid' };
  const webhook = {
    key,
    type: { const: 'webhook' },
    service_account_id: uuid,
    inbound_connector_id: { type: ['string', 'null'], format: 'uuid' },
    accept: {
      type: 'string',
      enum: [...WEBHOOK_ACCEPT],
      default: DEFAULT_WEBHOOK_ACCEPT,
      description: 'json: JSON bodies only; form: application/x-www-form-urlencoded bodies too (a payload field holding JSON is that JSON, else the fields)',
    },
  };
  const schedule = {
    key,
    type: { const: 'schedule' },
    cron: { type: 'string', maxLength: 200 },
    timezone: { type: 'string', maxLength: 100, default: DEFAULT_TIMEZONE },
    catch_up: { type: 'string', enum: [...CATCH_UP], default: DEFAULT_CATCH_UP },
  };
  const id = { ...uuid, description: "An existing trigger's id keeps its token; left out, the trigger is new" };
  return {
    webhook_trigger_params: { type: 'object', required: ['key', 'type', 'service_account_id'], additionalProperties: false, properties: { id, ...webhook } },
    schedule_trigger_params: { type: 'object', required: ['key', 'type', 'cron'], additionalProperties: false, properties: { id, ...schedule } },
    webhook_trigger: {
      type: 'object',
      required: ['id', 'key', 'type', 'service_account_id', 'inbound_connector_id', 'accept'],
      properties: { id: uuid, ...webhook },
    },
    schedule_trigger: {
      type: 'object',
      required: ['id', 'key', 'type', 'cron', 'timezone', 'catch_up', 'next_fire_at'],
      properties: { id: uuid, ...schedule, next_fire_at: { type: ['string', 'null'], format: 'date-time' } },
    },
  };
}

function builderStateAttributes(): Schema {
  const attrs = inputAttributes(builderStateInput, true);
  const properties = attrs.properties as Record<string, Schema>;
  return {
    ...attrs,
    properties: {
      ...properties,
      trigger_params: { ...properties.trigger_params, items: { oneOf: [ref('webhook_trigger_params'), ref('schedule_trigger_params')] } },
    },
  };
}

function specialPaths(registry: TypeRegistry): Record<string, PathItem> {
  const runs = registry.get('workflow_run')!;
  const doc = (schema: string, description: string) => ({ description, ...jsonApiContent(ref(schema)) });
  const metaBody = (properties: Schema) => ({
    required: false,
    ...jsonApiContent({ type: 'object', additionalProperties: false, properties: { meta: { type: 'object', additionalProperties: false, properties } } }),
  });
  const version = { type: 'string', enum: [...REPLAY_VERSIONS], default: 'original' };
  return {
    [`${API_PREFIX}/external_connectors/{id}/verify`]: {
      post: {
        operationId: 'verify_external_connector',
        tags: ['external_connector'],
        summary:
          "A cheap call through the connector's driver; the connector becomes verified or failing. An inbound connector is 422: its deliveries verify it",
        parameters: [idParam, idempotencyKey],
        responses: { 200: doc('external_connector_document', 'The connector with its new status'), ...errors(...WRITE_ERRORS) },
      },
    },
    [`${API_PREFIX}/external_connectors/{id}/rate_limit`]: {
      get: {
        operationId: 'get_external_connector_rate_limit',
        tags: ['external_connector'],
        summary: "The connector's rate budget (config.rate_limit) and its use in the current window, read without counting",
        parameters: [idParam],
        responses: {
          200: doc('connector_rate_limit_document', 'The budget and its use; limited is false and the rest null without a rate_limit'),
          ...errors(...COMMON_ERRORS, 404),
        },
      },
    },
    [`${API_PREFIX}/workflows/save_builder_state`]: {
      post: {
        operationId: 'save_workflow_builder_state',
        tags: ['workflow'],
        summary: "Save a workflow's whole graph (steps and triggers); new triggers' tokens are in meta.trigger_tokens, shown this once",
        parameters: [idempotencyKey],
        requestBody: { required: true, ...jsonApiContent(writeDocument('workflow_builder_state', builderStateAttributes(), false)) },
        responses: {
          201: doc(
            'workflow_document',
            'The saved workflow; meta.trigger_tokens maps new trigger keys to tokens; meta.relay_url, when the service knows its relay, is where providers post (<relay_url>/hooks/<token>)',
          ),
          ...errors(...WRITE_ERRORS),
        },
      },
    },
    [`${API_PREFIX}/workflows/{id}/test_run`]: {
      post: {
        operationId: 'test_run_workflow',
        tags: ['workflow'],
        summary: 'A dry run of a workflow version, or of an unsaved workflow_file, on a given payload: nothing is stored',
        parameters: [idParam, idempotencyKey],
        requestBody: {
          required: true,
          ...jsonApiContent(
            writeDocument(
              'workflow_test_run',
              (() => {
                const attrs = inputAttributes(testRunInput, true);
                return {
                  ...attrs,
                  required: ['payload'],
                  properties: {
                    payload: { description: 'The JSON a trigger would deliver' },
                    headers: {
                      type: ['object', 'null'],
                      additionalProperties: { type: 'string' },
                      maxProperties: MAX_HEADERS,
                      description: "The sample delivery's headers; expressions see them as delivery.headers (lowercased, credentials and signatures left out)",
                    },
                    deliveries: {
                      type: ['object', 'null'],
                      maxProperties: 100,
                      additionalProperties: {
                        type: 'object',
                        required: ['payload'],
                        properties: {
                          payload: {},
                          headers: { type: ['object', 'null'], additionalProperties: { type: 'string' }, maxProperties: MAX_HEADERS },
                        },
                      },
                      description: 'Sample deliveries for wait_for_delivery steps, by step key: the step goes on as if that delivery had matched',
                    },
                    ...(attrs.properties as Schema),
                    workflow_file: {
                      ...((attrs.properties as Record<string, Schema>).workflow_file ?? {}),
                      description:
                        'The text of a workflow file (YAML or JSON, as `workflow get --yaml` writes it), tested instead of a saved version, checked as its save would be; an error points at /data/attributes/workflow_file with meta.member, meta.line and meta.column',
                    },
                  },
                };
              })(),
              false,
            ),
          ),
        },
        responses: {
          200: {
            description: "The test run's steps, facts it would write and problems",
            ...jsonApiContent({
              type: 'object',
              properties: {
                data: { type: 'object', properties: { type: { const: 'workflow_test_run' }, id: { type: 'string' }, attributes: { type: 'object' } } },
              },
            }),
          },
          ...errors(...WRITE_ERRORS),
        },
      },
    },
    [`${API_PREFIX}/workflows/test_run`]: {
      post: {
        operationId: 'test_run_workflow_file',
        tags: ['workflow'],
        summary: 'A dry run of the workflow_file of a workflow not saved yet, on a given payload: nothing is stored',
        parameters: [idempotencyKey],
        requestBody: {
          required: true,
          ...jsonApiContent(
            writeDocument(
              'workflow_test_run',
              (() => {
                const attrs = inputAttributes(testRunInput, true);
                return {
                  ...attrs,
                  required: ['payload', 'workflow_file'],
                  properties: {
                    payload: { description: 'The JSON a trigger would deliver' },
                    headers: {
                      type: ['object', 'null'],
                      additionalProperties: { type: 'string' },
                      maxProperties: MAX_HEADERS,
                      description: "The sample delivery's headers; expressions see them as delivery.headers (lowercased, credentials and signatures left out)",
                    },
                    ...(attrs.properties as Schema),
                    workflow_file: {
                      ...((attrs.properties as Record<string, Schema>).workflow_file ?? {}),
                      description:
                        'The text of a workflow file (YAML or JSON, as `workflow get --yaml` writes it), tested instead of a saved version, checked as its save would be; an error points at /data/attributes/workflow_file with meta.member, meta.line and meta.column',
                    },
                  },
                };
              })(),
              false,
            ),
          ),
        },
        responses: {
          200: {
            description: "The test run's steps, facts it would write and problems",
            ...jsonApiContent({
              type: 'object',
              properties: {
                data: { type: 'object', properties: { type: { const: 'workflow_test_run' }, id: { type: 'string' }, attributes: { type: 'object' } } },
              },
            }),
          },
          ...errors(...WRITE_ERRORS),
        },
      },
    },
    [`${API_PREFIX}/workflow_runs/{id}/replay`]: {
      post: {
        operationId: 'replay_workflow_run',
        tags: ['workflow_run'],
        summary: 'Run the original payload again, on the original or the current workflow version',
        parameters: [idParam, idempotencyKey],
        requestBody: metaBody({ version }),
        responses: { 201: doc('workflow_run_document', 'The new run; Location names it'), ...errors(...WRITE_ERRORS) },
      },
    },
    [`${API_PREFIX}/workflow_runs/{id}/cancel`]: {
      post: {
        operationId: 'cancel_workflow_run',
        tags: ['workflow_run'],
        summary: 'Cancel a queued, retrying or waiting run: it never runs or resumes again (409 for a running or finished run)',
        parameters: [idParam, idempotencyKey],
        responses: { 200: doc('workflow_run_document', 'The cancelled run'), ...errors(...WRITE_ERRORS) },
      },
    },
    [`${API_PREFIX}/workflow_runs/replay`]: {
      post: {
        operationId: 'bulk_replay_workflow_runs',
        tags: ['workflow_run'],
        summary: 'Replay the runs the filter[...] parameters pick (at least one filter)',
        parameters: [...filterParams(runs), idempotencyKey],
        requestBody: metaBody({ version, limit: { type: 'integer', minimum: 1, maximum: BULK_REPLAY_MAX } }),
        responses: {
          ...Object.fromEntries(
            ['201', '200'].map((s) => [
              s,
              {
                description: s === '201' ? 'Runs replayed' : 'No run matched',
                ...jsonApiContent({
                  type: 'object',
                  properties: {
                    data: { type: 'array', items: identifier('workflow_run') },
                    meta: { type: 'object', properties: { replayed: { type: 'integer' }, has_more: { type: 'boolean' } } },
                    links: { $ref: '#/components/schemas/links' },
                  },
                }),
              },
            ]),
          ),
          ...errors(...WRITE_ERRORS),
        },
      },
    },
    [`${API_PREFIX}/providers`]: {
      get: {
        operationId: 'list_providers',
        tags: ['provider'],
        summary: 'The bundled provider catalog (one page, no query parameters)',
        responses: { 200: doc('provider_list', 'Every bundled provider'), ...errors(...COMMON_ERRORS) },
      },
    },
    [`${API_PREFIX}/providers/{slug}`]: {
      get: {
        operationId: 'get_provider',
        tags: ['provider'],
        summary: 'One bundled provider',
        parameters: [{ name: 'slug', in: 'path', required: true, schema: { type: 'string' } }],
        responses: { 200: doc('provider_document', 'The provider'), ...errors(...COMMON_ERRORS, 404) },
      },
    },
    [OPENAPI_PATH]: {
      get: {
        operationId: 'get_openapi_document',
        tags: ['meta'],
        summary: 'This document (public)',
        security: [],
        responses: { 200: { description: 'The OpenAPI 3.1 document', content: { 'application/json': { schema: { type: 'object' } } } } },
      },
    },
  };
}

/** A connector's rate budget and its use: not a stored type, so not in the registry. */
function rateLimitSchemas(): Record<string, Schema> {
  return {
    connector_rate_limit: {
      type: 'object',
      required: ['type', 'id', 'attributes'],
      properties: {
        type: { const: 'connector_rate_limit' },
        id: { type: 'string', format: 'uuid', description: "The connector's id" },
        attributes: {
          type: 'object',
          required: ['limited', 'requests', 'per_seconds', 'used', 'remaining', 'resets_at'],
          properties: {
            limited: { type: 'boolean', description: 'Whether the connector has a config.rate_limit; without one the other attributes are null' },
            requests: nullable({ type: 'integer', description: 'Calls allowed in a window' }),
            per_seconds: nullable({ type: 'number', description: "The window's length in seconds" }),
            used: nullable({ type: 'integer', description: 'Calls counted in the sliding window now: those of the last per_seconds and the margin' }),
            remaining: nullable({ type: 'integer', description: 'requests less used, never below 0' }),
            resets_at: nullable({
              type: 'string',
              format: 'date-time',
              description: 'When the oldest call counted leaves the window (now when none is counted)',
            }),
          },
        },
      },
    },
    connector_rate_limit_document: {
      type: 'object',
      required: ['data'],
      properties: { data: ref('connector_rate_limit'), links: { $ref: '#/components/schemas/links' } },
    },
  };
}

function providerSchemas(): Record<string, Schema> {
  const provider = {
    type: 'object',
    required: ['type', 'id'],
    properties: { type: { const: 'provider' }, id: { type: 'string' }, attributes: { type: 'object' } },
  };
  return { provider, provider_document: document(ref('provider')), provider_list: document({ type: 'array', items: ref('provider') }) };
}

// ---------------------------------------------------------------- the token and webhook endpoints

function tokenPaths(): Record<string, PathItem> {
  const oauthError = (codes: string[]) => ({
    'application/json': {
      schema: { type: 'object', required: ['error'], properties: { error: { type: 'string', enum: codes }, error_description: { type: 'string' } } },
    },
  });
  const form = {
    type: 'object',
    required: ['grant_type'],
    properties: {
      grant_type: { const: 'client_credentials' },
      client_id: { type: 'string', description: 'Or in HTTP Basic' },
      client_secret: { type: 'string', description: 'Or in HTTP Basic' },
      scope: { type: 'string', description: 'Space-separated subset of the granted scopes' },
    },
  };
  return {
    [TOKEN_PATH]: {
      post: {
        operationId: 'exchange_token',
        tags: ['oauth'],
        summary: "Exchange a service account's client id and secret for a bearer token (client credentials, RFC 6749)",
        security: [{}, { client_basic: [] }],
        requestBody: { required: true, content: { 'application/x-www-form-urlencoded': { schema: form }, 'application/json': { schema: form } } },
        responses: {
          200: {
            description: 'A bearer token; Cache-Control: no-store',
            content: {
              'application/json': {
                schema: {
                  type: 'object',
                  required: ['access_token', 'token_type', 'expires_in'],
                  properties: { access_token: { type: 'string' }, token_type: { const: 'bearer' }, expires_in: { type: 'integer' }, scope: { type: 'string' } },
                },
              },
            },
          },
          400: { description: 'RFC 6749 5.2', content: oauthError(['invalid_request', 'unsupported_grant_type', 'invalid_scope']) },
          401: {
            description: 'Unknown, wrong-secret or inactive account (WWW-Authenticate: Basic when Basic was used)',
            content: oauthError(['invalid_client']),
          },
        },
      },
    },
  };
}

function webhookPaths(): Record<string, PathItem> {
  const answer = (text: string, retry = false) => ({
    description: text,
    ...(retry ? { headers: { 'Retry-After': { schema: { type: 'integer' } } } } : {}),
    content: { 'application/json': { schema: { type: 'object', required: ['error'], properties: { error: { type: 'string', examples: [text] } } } } },
  });
  return {
    '/api/v1/webhooks/{token}': {
      post: {
        operationId: 'deliver_webhook',
        tags: ['webhook'],
        summary: "Deliver a JSON payload to a workflow's trigger; 202 only once the run is stored",
        description:
          "The sender's bearer token (a service account's), and the inbound connector's API key or Standard Webhooks signature (webhook-id, webhook-timestamp, webhook-signature) when it has one. A delivery id seen before answers duplicate.",
        parameters: [
          { name: 'token', in: 'path', required: true, description: "The trigger's token", schema: { type: 'string' } },
          { name: 'webhook-id', in: 'header', required: false, schema: { type: 'string' } },
          { name: 'webhook-timestamp', in: 'header', required: false, schema: { type: 'string' } },
          { name: 'webhook-signature', in: 'header', required: false, schema: { type: 'string' } },
        ],
        requestBody: {
          required: true,
          content: {
            'application/json': { schema: {} },
            'application/x-www-form-urlencoded': {
              schema: {
                type: 'object',
                additionalProperties: { type: 'string' },
                description: "Only on a trigger with accept: form: a payload field holding JSON is that JSON, else the form's fields",
              },
            },
          },
        },
        responses: {
          202: {
            description: 'Accepted, or a duplicate of a delivery already accepted',
            content: {
              'application/json': {
                schema: {
                  oneOf: [
                    {
                      type: 'object',
                      required: ['status', 'workflow_run_id'],
                      properties: { status: { const: 'accepted' }, workflow_run_id: { type: 'string' } },
                    },
                    { type: 'object', required: ['status'], properties: { status: { const: 'duplicate' } } },
                  ],
                },
              },
            },
          },
          401: answer('missing_credentials | Unauthorized'),
          403: answer('Insufficient scope'),
          404: answer('Trigger not found'),
          413: answer('Payload too large'),
          422: answer('Unsupported trigger authentication | Processing failed'),
          429: answer('Rate limit exceeded', true),
          503: answer('Processing temporarily unavailable', true),
        },
      },
    },
  };
}

function graphqlPaths(): Record<string, PathItem> {
  return {
    [GRAPHQL_SDL_PATH]: {
      get: {
        operationId: 'get_graphql_schema',
        tags: ['meta'],
        summary: 'The GraphQL schema (SDL) of POST /api/graphql (public)',
        security: [],
        responses: { 200: { description: 'The SDL', content: { 'text/plain': { schema: { type: 'string' } } } } },
      },
    },
  };
}

// ---------------------------------------------------------------- the document

export function buildOpenApiDocument(opts: OpenApiOptions, registry: TypeRegistry = RESOURCE_TYPES): Record<string, unknown> {
  const inputs = writableInputs(opts);
  const types = [...registry.values()];
  const schemas: Record<string, Schema> = { ...errorSchemas(), ...providerSchemas(), ...rateLimitSchemas(), ...triggerSchemas() };
  let paths: Record<string, PathItem> = {};
  for (const type of types) {
    Object.assign(schemas, resourceSchemas(type, inputs.get(type.type)));
    paths = { ...paths, ...resourcePaths(type, registry, inputs.get(type.type)) };
  }
  // A json attribute is any JSON; the workflow's triggers have members of their own.
  const workflowAttributes = schemas.workflow_attributes?.properties as Record<string, Schema> | undefined;
  if (workflowAttributes?.triggers) workflowAttributes.triggers = { type: 'array', items: { oneOf: [ref('webhook_trigger'), ref('schedule_trigger')] } };
  for (const [path, item] of Object.entries({ ...specialPaths(registry), ...tokenPaths(), ...webhookPaths(), ...graphqlPaths() })) {
    paths[path] = { ...paths[path], ...item };
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Tributary API',
      version: 'v1',
      description: 'The JSON:API resources of Tributary, its token endpoint and its webhook ingestion endpoint.',
    },
    servers: [{ url: '/' }],
    security: [{ bearer: [] }, { oauth2: [] }],
    tags: [...types.map((t) => ({ name: t.type })), ...['provider', 'oauth', 'webhook', 'meta'].map((name) => ({ name }))],
    paths,
    components: {
      schemas,
      responses: errorResponses(),
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', description: `A token from POST ${TOKEN_PATH}` },
        oauth2: {
          type: 'oauth2',
          flows: { clientCredentials: { tokenUrl: TOKEN_PATH, scopes: Object.fromEntries(SCOPES.map((s) => [s, `The ${s} scope`])) } },
        },
        client_basic: { type: 'http', scheme: 'basic', description: 'client_id and client_secret, for the token endpoint' },
      },
    },
  };
}

let built: { key: string; text: string } | undefined;

/** The document as served: built on first request, then the same bytes for the life of the process. */
export function openApiText(opts: OpenApiOptions): string {
  const key = JSON.stringify(opts);
  if (built?.key !== key) built = { key, text: JSON.stringify(buildOpenApiDocument(opts)) };
  return built.text;
}
