/**
 * A test run of an unsaved definition (attribute workflow_file): the file's text is read and
 * checked as its save would be, its problems answered at /data/attributes/workflow_file with
 * the member and the line and column; a valid file runs in the place of the saved version
 * (POST workflows/:id/test_run) or as a workflow not saved yet (POST workflows/test_run),
 * and nothing is saved either way.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { sql } from 'kysely';
import { API, createModel, saveOk, startFlow, type Flow } from '../webhooks/helpers.ts';

const f: Flow = await startFlow({}, {});
await createModel(f, 'orders', [
  { name: 'order_id', type: 'string' },
  { name: 'status', type: 'string' },
]);
const { workflow } = await saveOk(f, {
  wf_params: { name: 'orders', description: null, is_active: true },
  step_params: [{ key: 'shape', type: 'transform', config: { expression: '{"order_id": payload.id}' } }],
});

const FILE = `name: orders
triggers:
  shop: { type: webhook }
steps:
  shape:
    type: transform
    expression: '{"order_id": payload.id, "status": payload.status}'
  store:
    type: write_fact
    data_model_slug: orders
    mapping: { order_id: steps.shape.order_id, status: steps.shape.status }
`;

const post = (path: string, attributes: Record<string, unknown>) => f.api.post(`${API}${path}`, { data: { type: 'workflow_test_run', attributes } });

async function versions(): Promise<number> {
  const { rows } = await sql<{ n: string }>`select count(*)::text as n from workflow_versions`.execute(f.t.deps.db);
  return Number(rows[0]!.n);
}

describe('a test run of a workflow_file', () => {
  it('runs the unsaved steps in the place of the saved version, and saves nothing', async () => {
    const before = await versions();
    const r = await post(`/workflows/${workflow.id}/test_run`, { payload: { id: 'o-1', status: 'paid' }, workflow_file: FILE });
    assert.equal(r.status, 200, r.text);
    const a = r.body.data.attributes;
    assert.equal(a.workflow_id, workflow.id);
    assert.equal(a.workflow_version, null);
    assert.equal(a.status, 'succeeded', r.text);
    assert.deepEqual(
      a.steps.map((s: { key: string }) => s.key),
      ['shape', 'store'],
    );
    assert.equal(a.facts_would_write, 1);
    assert.deepEqual(a.steps[1].facts[0].data, { order_id: 'o-1', status: 'paid' });
    assert.equal(await versions(), before);
    const still = await f.api.get(`${API}/workflows/${workflow.id}`);
    assert.equal(still.body.data.attributes.steps.length, 1);
  });

  it('tests the file of a workflow not saved yet at workflows/test_run', async () => {
    const r = await post('/workflows/test_run', { payload: { id: 'o-2', status: 'new' }, workflow_file: FILE.replace('name: orders', 'name: brand new') });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.body.data.attributes.workflow_id, null);
    assert.equal(r.body.data.attributes.status, 'succeeded');
    const none = await post('/workflows/test_run', { payload: {} });
    assert.equal(none.status, 422, none.text);
    assert.equal(none.body.errors[0].source.pointer, '/data/attributes/workflow_file');
  });

  it('refuses what its save would refuse, at the member and its line and column', async () => {
    // Line 11: a field the data model does not have (the save's own database check).
    const badField = FILE.replace('status: steps.shape.status }', 'status: steps.shape.status }\n    ').replace('mapping: { order_id', 'mapping: { nope');
    const r = await post(`/workflows/${workflow.id}/test_run`, { payload: {}, workflow_file: badField });
    assert.equal(r.status, 422, r.text);
    const e = r.body.errors[0];
    assert.equal(e.code, 'invalid_request');
    assert.equal(e.source.pointer, '/data/attributes/workflow_file');
    assert.equal(e.meta.member, 'steps.store.mapping.nope');
    assert.equal(e.meta.line, 11);
    assert.equal(e.meta.column, 16);
    assert.equal(e.meta.builder_pointer, '/data/attributes/step_params/1/config/mapping/nope');
    assert.match(e.detail, /not a field of the data model orders/);
    // The error docs/workflows.md shows is this one.
    const docs = fs.readFileSync(path.resolve(import.meta.dirname, '..', '..', 'docs', 'workflows.md'), 'utf8');
    const shown = /### Test runs of a file[^]*?```json\n([^]*?)```/.exec(docs)![1]!;
    const documented = JSON.parse(shown).errors[0];
    assert.deepEqual(documented.meta, e.meta);
    assert.equal(documented.detail, e.detail);
    assert.deepEqual(documented.source, e.source);

    // A step that reads a later step: the shape check, at its expression's line.
    const later = FILE.replace(`'{"order_id": payload.id, "status": payload.status}'`, 'steps.store');
    const r2 = await post('/workflows/test_run', { payload: {}, workflow_file: later });
    assert.equal(r2.status, 422, r2.text);
    assert.equal(r2.body.errors[0].meta.member, 'steps.shape.expression');
    assert.equal(r2.body.errors[0].meta.line, 7);
    assert.equal(r2.body.errors[0].meta.column, 5);

    // Not YAML at all: the parser's line.
    const broken = await post('/workflows/test_run', { payload: {}, workflow_file: 'name: x\nsteps:\n  a: { type: transform\n' });
    assert.equal(broken.status, 422, broken.text);
    assert.match(broken.body.errors[0].detail, /not valid YAML/);
    assert.equal(typeof broken.body.errors[0].meta.line, 'number');

    // A file's own shape: an unknown member of the file.
    const unknown = await post('/workflows/test_run', { payload: {}, workflow_file: `${FILE}colour: blue\n` });
    assert.equal(unknown.status, 422, unknown.text);
    assert.equal(unknown.body.errors[0].meta.member, 'colour');
    assert.equal(unknown.body.errors[0].meta.line, 12);
  });

  it('tests a saved version or a file, not both; a file of another workspace workflow is 404', async () => {
    const both = await post(`/workflows/${workflow.id}/test_run`, { payload: {}, version: 1, workflow_file: FILE });
    assert.equal(both.status, 422, both.text);
    const missing = await post('/workflows/0190a000-0000-7000-8000-000000000000/test_run', { payload: {}, workflow_file: FILE });
    assert.equal(missing.status, 404, missing.text);
  });
});
