/**
 * Our own API, described: GET /api/json/v1/openapi.json is a valid OpenAPI 3.1 document,
 * names every JSON:API route the server registered (and nothing it does not serve), imports
 * through our own api_specs endpoint, and a real code generator builds types from it.
 * GET /api/graphql/schema.graphql answers the published schema.graphql.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { describe, test } from 'node:test';
import SwaggerParser from '@apidevtools/swagger-parser';
import { jsonApi, seedTenant, startApp, tokenFor } from '../helpers/app.ts';

const t = await startApp();
test.after(() => t.close());

async function fetchDocument(): Promise<any> {
  const res = await fetch(`${t.url}/api/json/v1/openapi.json`);
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
  return res.json();
}

const METHODS = ['get', 'post', 'patch', 'put', 'delete'];

/** "GET /api/json/v1/x/:id" for each operation of the document under the JSON:API prefix. */
function documentOperations(doc: any): Set<string> {
  const ops = new Set<string>();
  for (const [path, item] of Object.entries<any>(doc.paths)) {
    if (!path.startsWith('/api/json/v1/')) continue;
    for (const m of METHODS) if (item[m]) ops.add(`${m.toUpperCase()} ${path.replace(/\{([^}]+)\}/g, ':$1')}`);
  }
  return ops;
}

/** The URLs of the router's tree (printRoutes without common prefixes: one segment per line, indented 4 per level). */
function routerUrls(tree: string): string[] {
  const stack: string[] = [];
  const urls: string[] = [];
  for (const line of tree.split('\n')) {
    const m = /^([│├└─\s]*)(\S.*?)(?: \(([^)]*)\))?$/.exec(line);
    if (!m) continue;
    const depth = m[1]!.length / 4;
    stack.length = depth;
    stack.push(m[2]!);
    if (m[3] !== undefined) urls.push(stack.join(''));
  }
  return urls;
}

/**
 * Every method Fastify serves under /api/json/v1: the router's URLs, and for each the Allow
 * header its OPTIONS answers (what the path serves, not the routes that only refuse with 405).
 */
async function servedOperations(): Promise<Set<string>> {
  const ops = new Set<string>();
  const urls = routerUrls(t.app.printRoutes({ commonPrefix: false })).filter((u) => u.startsWith('/api/json/v1/') && !u.includes('*'));
  assert.ok(urls.length > 20, `router tree read: ${urls.length} URLs`);
  for (const url of urls) {
    const concrete = url.replace(/:[a-z_]+/g, '00000000-0000-4000-8000-000000000000');
    const res = await fetch(`${t.url}${concrete}`, { method: 'OPTIONS' });
    assert.equal(res.status, 204, `OPTIONS ${url}`);
    for (const m of (res.headers.get('allow') ?? '').split(', ')) if (m !== 'HEAD' && m !== 'OPTIONS' && m !== '') ops.add(`${m} ${url}`);
  }
  return ops;
}

describe('the OpenAPI document', () => {
  test('is public, and valid against the OpenAPI 3.1 schema', async () => {
    const doc = await fetchDocument();
    assert.equal(doc.openapi, '3.1.0');
    await SwaggerParser.validate(structuredClone(doc));
  });

  test('the validator refuses a broken 3.1 document (the check above can fail)', async () => {
    const doc = await fetchDocument();
    doc.paths['/api/json/v1/data_models'].get.responses = { 200: { content: {} } };
    await assert.rejects(SwaggerParser.validate(doc));
    const unknownRef = await fetchDocument();
    unknownRef.paths['/api/json/v1/data_models'].get.responses['200'].content['application/vnd.api+json'].schema = { $ref: '#/components/schemas/nope' };
    await assert.rejects(SwaggerParser.validate(unknownRef));
  });

  test('every route served under /api/json/v1 is in it, and every operation in it is served', async () => {
    const documented = documentOperations(await fetchDocument());
    const served = await servedOperations();
    assert.deepEqual([...served].filter((op) => !documented.has(op)).sort(), [], 'served but not documented');
    assert.deepEqual([...documented].filter((op) => !served.has(op)).sort(), [], 'documented but not served');
    for (const op of [
      'GET /api/json/v1/workflow_runs',
      'POST /api/json/v1/workflow_runs/replay',
      'POST /api/json/v1/workflows/:id/test_run',
      'PATCH /api/json/v1/api_specs/:id',
    ])
      assert.ok(served.has(op), op);
  });

  test('its schemas and parameters come from the type registry', async () => {
    const doc = await fetchDocument();
    const runAttrs = doc.components.schemas.workflow_run_attributes.properties;
    assert.deepEqual(runAttrs.status.enum.includes('succeeded'), true);
    const list = doc.paths['/api/json/v1/workflow_runs'].get.parameters.map((p: any) => p.name);
    for (const name of [
      'filter[status]',
      'filter[status][in]',
      'filter[inserted_at][gte]',
      'include',
      'fields[workflow_run]',
      'sort',
      'page[limit]',
      'page[after]',
      'page[before]',
    ])
      assert.ok(list.includes(name), name);
    const create = doc.components.schemas.data_model_create.properties.data.properties.attributes;
    assert.deepEqual(create.required, ['name', 'slug']);
    assert.equal(doc.components.securitySchemes.oauth2.flows.clientCredentials.tokenUrl, '/api/v1/oauth/token');
    assert.ok(doc.paths['/api/v1/oauth/token'].post.responses['401']);
    assert.deepEqual(Object.keys(doc.paths['/api/v1/webhooks/{token}'].post.responses).sort(), ['202', '401', '403', '404', '413', '422', '429', '503']);
  });

  test("a workflow's triggers, as saved and as read, match their schemas (accept among them)", async () => {
    const doc = await fetchDocument();
    const schemas = doc.components.schemas;
    assert.deepEqual(schemas.webhook_trigger_params.properties.accept.enum, ['json', 'form']);
    const save = doc.paths['/api/json/v1/workflows/save_builder_state'].post.requestBody.content['application/vnd.api+json'].schema;
    /** Whether a list of triggers fits an array-of-oneOf schema: one branch (by type's const) whose required members it has, no member outside it, enums kept. */
    const fits = (arraySchema: any) => (list: any[]) =>
      list.every((item) => {
        const branch = arraySchema.items.oneOf.map((r: any) => schemas[r.$ref.split('/').pop()]).find((b: any) => b.properties.type.const === item.type);
        if (!branch) return false;
        const members = Object.entries<any>(item).filter(([, v]) => v !== undefined);
        return (
          branch.required.every((k: string) => Object.hasOwn(item, k)) &&
          members.every(([k, v]) => Object.hasOwn(branch.properties, k) && (branch.properties[k].enum === undefined || branch.properties[k].enum.includes(v)))
        );
      });
    const triggerParams = fits(save.properties.data.properties.attributes.properties.trigger_params);
    const readTriggers = fits(schemas.workflow_attributes.properties.triggers);

    const tenant = await seedTenant(t.deps);
    const api = jsonApi(t, await tokenFor(t, tenant));
    const params = [
      { key: 'slash', type: 'webhook', service_account_id: tenant.credentialId, accept: 'form' },
      { key: 'hook', type: 'webhook', service_account_id: tenant.credentialId },
      { key: 'tick', type: 'schedule', cron: '0 6 * * *' },
    ];
    assert.ok(triggerParams(params));
    assert.equal(triggerParams([{ ...params[0], accept: 'xml' }]), false, 'a bad accept fails the schema too');
    const saved = await api.post('/api/json/v1/workflows/save_builder_state', {
      data: {
        type: 'workflow_builder_state',
        attributes: {
          is_new_version: false,
          organization_id: tenant.organizationId,
          wf_params: { name: 'triggers', is_active: true },
          step_params: [{ key: 'a', type: 'transform', config: { expression: 'payload' } }],
          trigger_params: params,
        },
      },
    });
    assert.equal(saved.status, 201, saved.text);
    const triggers = saved.body.data.attributes.triggers;
    assert.deepEqual(
      triggers.map((x: any) => x.accept),
      ['form', 'json', undefined],
    );
    assert.ok(readTriggers(triggers), JSON.stringify(triggers));
    const { accept: _accept, ...withoutAccept } = triggers[0];
    assert.equal(readTriggers([withoutAccept]), false, 'a read webhook always shows accept');
  });

  test('it imports through our own api_specs endpoint, with its operations listed', async () => {
    const api = jsonApi(t, await tokenFor(t, await seedTenant(t.deps)));
    const text = await (await fetch(`${t.url}/api/json/v1/openapi.json`)).text();
    const r = await api.post('/api/json/v1/api_specs', { data: { type: 'api_spec', attributes: { name: 'Tributary', format: 'json', raw_document: text } } });
    assert.equal(r.status, 201, r.text);
    const a = r.body.data.attributes;
    assert.equal(a.openapi_version, '3.1.0');
    const refs = a.operations.map((o: any) => o.operation_ref);
    for (const ref of ['list_workflow_runs', 'bulk_replay_workflow_runs', 'exchange_token', 'deliver_webhook', 'save_workflow_builder_state'])
      assert.ok(refs.includes(ref), ref);
    assert.equal(refs.length, Object.values<any>(JSON.parse(text).paths).flatMap((item) => METHODS.filter((m) => item[m])).length);
  });

  test('a real generator (openapi-typescript) builds types from it', async () => {
    const generator = await import('openapi-typescript');
    const { default: openapiTS, astToString } = generator;
    const ast = await openapiTS(await fetchDocument());
    const out: string = astToString(ast);
    for (const name of ['data_model_attributes', 'workflow_run', 'api_spec_create', 'error', '"/api/json/v1/workflow_runs/replay"', '"/api/v1/oauth/token"'])
      assert.ok(out.includes(name), name);
  });
});

describe('the GraphQL SDL', () => {
  test('GET /api/graphql/schema.graphql answers schema.graphql, without a token', async () => {
    const res = await fetch(`${t.url}/api/graphql/schema.graphql`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/plain/);
    assert.equal(await res.text(), fs.readFileSync(new URL('../../schema.graphql', import.meta.url), 'utf8'));
  });
});
