/**
 * Uploads cannot freeze the server (issue 19, item 4): documents are read in child
 * processes, so /healthz answers while a large one is imported; a document with more
 * operations than API_SPEC_MAX_OPERATIONS, or one that runs past its time budget, is 422
 * at raw_document saying so; past the processes and the queue an upload is 503.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { assertJsonApiError, jsonApi, seedTenant, startApp, tokenFor, type TestApp } from '../helpers/app.ts';
import { bigSpec } from '../helpers/big-spec.ts';

const PATH = '/api/json/v1/api_specs';
const RAW = { pointer: '/data/attributes/raw_document' };
const upload = (raw_document: string, format = 'yaml') => ({ data: { type: 'api_spec', attributes: { name: 'Big', format, raw_document } } });

async function appWithApi(env: Record<string, string>) {
  const t = await startApp(env);
  test.after(() => t.close());
  return { t, api: jsonApi(t, await tokenFor(t, await seedTenant(t.deps))) };
}

/** GET /healthz, one after another, until `done` settles: how many answered meanwhile. */
async function healthzDuring(t: TestApp, done: Promise<unknown>): Promise<number> {
  let settled = false;
  void done.finally(() => (settled = true));
  let answered = 0;
  while (!settled) {
    const r = await fetch(`${t.url}/healthz`);
    assert.equal(r.status, 200);
    await r.arrayBuffer();
    answered++;
  }
  return answered;
}

describe('a large document', async () => {
  const { t, api } = await appWithApi({ API_SPEC_MAX_OPERATIONS: '30000', API_SPEC_IMPORT_PROCESSES: '1', API_SPEC_IMPORT_QUEUE: '0' });

  test('/healthz answers while 20,000 operations are imported', async () => {
    const text = bigSpec(20_000, 'yaml');
    const created = api.post(PATH, upload(text));
    const answered = await healthzDuring(t, created);
    const r = await created;
    assert.equal(r.status, 201, r.text.slice(0, 500));
    assert.equal(r.body.data.attributes.operations.length, 20_000);
    // Read on the event loop, the document held every /healthz until it was done: 2 to 11
    // answered during the upload and the insert; read in a child process, thousands.
    assert.ok(answered >= 50, `${answered} /healthz answered while the document was imported`);
  });

  test('one process, no queue: a second document at the same time is 503 with Retry-After; the process is reused', async () => {
    const text = bigSpec(20_000, 'json');
    const [a, b] = await Promise.all([api.post(PATH, upload(text, 'json')), api.post(PATH, upload(text, 'json'))]);
    assert.deepEqual([a.status, b.status].sort(), [201, 503], `${a.text.slice(0, 300)} ${b.text.slice(0, 300)}`);
    const refused = a.status === 503 ? a : b;
    assertJsonApiError(refused, 503, 'unavailable');
    assert.ok(Number(refused.headers.get('retry-after')) >= 1);
    assert.equal(t.deps.specImporter.stats().started, 1);
  });
});

describe('budgets', async () => {
  const capped = await appWithApi({ API_SPEC_MAX_OPERATIONS: '100' });
  const hurried = await appWithApi({ API_SPEC_IMPORT_TIMEOUT_MS: '1' });

  test('more operations than API_SPEC_MAX_OPERATIONS: 422 at raw_document naming the cap', async () => {
    const r = await capped.api.post(PATH, upload(bigSpec(101, 'yaml')));
    assertJsonApiError(r, 422, 'invalid_request', RAW);
    assert.match(r.body.errors[0].detail, /more than 100 operations.*API_SPEC_MAX_OPERATIONS/);
    assert.equal((await capped.api.post(PATH, upload(bigSpec(100, 'yaml')))).status, 201);
  });

  test('a shared schema that many operations reference, written out past 16 MiB: 422, and nothing of it reaches this process', async () => {
    const paths: Record<string, unknown> = {};
    for (let i = 0; i < 60; i++) {
      paths[`/p${i}`] = {
        get: {
          operationId: `op${i}`,
          responses: { '200': { description: 'ok', content: { 'application/json': { schema: { $ref: '#/components/schemas/Big' } } } } },
        },
      };
    }
    const doc = JSON.stringify({
      openapi: '3.0.3',
      info: { title: 'fan-out', version: '1' },
      paths,
      components: { schemas: { Big: { type: 'string', description: 'd'.repeat(300_000) } } },
    });
    const r = await capped.api.post(PATH, upload(doc, 'json'));
    assertJsonApiError(r, 422, 'invalid_request', RAW);
    assert.match(r.body.errors[0].detail, /operations take more than 16777216 bytes once their \$refs are written out/);
  });

  test('a document past its time budget: 422 at raw_document saying so; the next process answers', async () => {
    const r = await hurried.api.post(PATH, upload(bigSpec(2_000, 'yaml')));
    assertJsonApiError(r, 422, 'invalid_request', RAW);
    assert.match(r.body.errors[0].detail, /exceeded its time budget \(1 ms\)/);
    assert.equal(hurried.t.deps.specImporter.stats().running, 0);
    const again = await hurried.api.post(PATH, upload(bigSpec(2_000, 'yaml')));
    assert.match(again.body.errors[0].detail, /exceeded its time budget/);
  });
});
