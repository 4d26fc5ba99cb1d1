/** The main path end to end: a delivery starts a run, the worker shapes it, facts settle and factQuery reads them. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { API, createModel, deliver, saveOk, startFlow, waitForRun, type Flow } from './helpers.ts';

const f: Flow = await startFlow();
await createModel(f, 'orders', [
  { name: 'order_id', type: 'string' },
  { name: 'amount', type: 'float', is_required: true },
  { name: 'status', type: 'string' },
]);
const saved = await saveOk(f, {
  step_params: [
    {
      key: 'shape',
      type: 'transform',
      config: { expression: '{"id": payload.order.id, "total": payload.order.total, "state": $lowercase(payload.order.state)}' },
    },
    { key: 'big_enough', type: 'condition', config: { expression: 'steps.shape.total != 0' } },
    {
      key: 'store',
      type: 'write_fact',
      config: {
        data_model_slug: 'orders',
        mapping: { order_id: 'steps.shape.id', amount: 'steps.shape.total', status: 'steps.shape.state' },
        observed_at: 'payload.at',
      },
    },
  ],
});
const token: string = saved.tokens.hook!;
const workflowId: string = saved.workflow.id;

describe('webhook to facts', () => {
  it('returns the new trigger token once', () => {
    assert.match(token, /^tbwh_[A-Za-z0-9_-]{43}$/);
  });

  it('accepts a delivery, runs the workflow and stores the fact', async () => {
    const d = await deliver(
      f,
      `/api/v1/webhooks/${token}`,
      JSON.stringify({ payload: { at: '2026-11-01T10:00:00Z', order: { id: 'o-1', total: 12.5, state: 'OPEN' } } }),
      { 'idempotency-key': 'd-1' },
    );
    assert.equal(d.status, 202, d.text);
    assert.equal(d.body.status, 'accepted');
    const run = await waitForRun(f, d.body.workflow_run_id);
    assert.equal(run.attributes.status, 'succeeded', JSON.stringify(run.attributes));
    assert.equal(run.attributes.workflow_id, workflowId);
    assert.equal(run.attributes.delivery_id, 'd-1');
    assert.equal(run.attributes.trigger_key, 'hook');
    assert.deepEqual(
      run.attributes.steps.map((s: any) => [s.key, s.status]),
      [
        ['shape', 'succeeded'],
        ['big_enough', 'succeeded'],
        ['store', 'succeeded'],
      ],
    );
    assert.deepEqual(run.attributes.steps[2].output, { data_model_slug: 'orders', items: 1, written: 1, duplicates: 0 });

    const g = await fetch(`${f.t.url}/api/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${f.bearer}` },
      body: JSON.stringify({ query: '{ factQuery(dataModelSlug: "orders") { count results { entityId observedAt data } } }' }),
    });
    const body = (await g.json()) as any;
    assert.equal(body.data.factQuery.count, 1, JSON.stringify(body));
    assert.equal(body.data.factQuery.results[0].entityId, 'o-1');
    assert.equal(body.data.factQuery.results[0].observedAt, '2026-11-01T10:00:00.000Z');
    assert.deepEqual(JSON.parse(body.data.factQuery.results[0].data), { order_id: 'o-1', amount: 12.5, status: 'open' });
  });

  it('answers a repeated delivery id with duplicate and makes no second run', async () => {
    const body = JSON.stringify({ payload: { at: '2026-11-01T10:00:00Z', order: { id: 'o-2', total: 1, state: 'x' } } });
    const a = await deliver(f, `/api/v1/webhooks/${token}`, body, { 'x-beta-webhook-id': 'dup-1' });
    const b = await deliver(f, `/api/v1/webhooks/${token}`, body, { 'x-beta-webhook-id': 'dup-1' });
    assert.equal(a.body.status, 'accepted');
    assert.deepEqual(b.body, { status: 'duplicate' });
    assert.equal(b.status, 202);
    const runs = await f.api.get(`${API}/workflow_runs?filter[delivery_id]=dup-1&page[count]=true`);
    assert.equal(runs.body.meta.page.total, 1);
  });

  it('ends a run whose condition is false as succeeded with the rest skipped', async () => {
    const d = await deliver(
      f,
      `/api/v1/webhooks/${token}`,
      JSON.stringify({ payload: { at: '2026-11-01T10:00:00Z', order: { id: 'o-3', total: 0, state: 'x' } } }),
    );
    const run = await waitForRun(f, d.body.workflow_run_id);
    assert.equal(run.attributes.status, 'succeeded');
    assert.deepEqual(
      run.attributes.steps.map((s: any) => s.status),
      ['succeeded', 'succeeded', 'skipped'],
    );
  });

  it('fails a run whose fact does not fit the data model, naming the field', async () => {
    const d = await deliver(
      f,
      `/api/v1/webhooks/${token}`,
      JSON.stringify({ payload: { at: '2026-11-01T10:00:00Z', order: { id: 'o-4', total: 'lots', state: 'x' } } }),
    );
    const run = await waitForRun(f, d.body.workflow_run_id);
    assert.equal(run.attributes.status, 'failed');
    assert.equal(run.attributes.attempt, 1, 'a permanent failure is not retried');
    assert.match(run.attributes.error, /Step store failed: .*data\/amount/);
    assert.equal(run.attributes.steps[2].status, 'failed');
  });

  it('replays a run: same payload and version, linked to the original', async () => {
    const d = await deliver(
      f,
      `/api/v1/webhooks/${token}`,
      JSON.stringify({ payload: { at: '2026-11-02T10:00:00Z', order: { id: 'o-5', total: 3, state: 'x' } } }),
    );
    const original = await waitForRun(f, d.body.workflow_run_id);
    const r = await f.api.post(`${API}/workflow_runs/${original.id}/replay`, undefined);
    assert.equal(r.status, 201, r.text);
    assert.equal(r.body.data.attributes.replay_of, original.id);
    assert.deepEqual(r.body.data.attributes.payload, original.attributes.payload);
    const replayed = await waitForRun(f, r.body.data.id);
    assert.equal(replayed.attributes.status, 'succeeded');
    // The same delivery on the same version: the original's fact, not a second one.
    assert.equal(replayed.attributes.steps[2].output.written, 0);
    assert.equal(replayed.attributes.steps[2].output.duplicates, 1);
    assert.equal(replayed.attributes.facts_written, 0);
  });

  it('a replay with a body other than meta.version is refused (422), since nothing of it would be read; no run is made', async () => {
    const d = await deliver(
      f,
      `/api/v1/webhooks/${token}`,
      JSON.stringify({ payload: { at: '2026-11-03T10:00:00Z', order: { id: 'o-6', total: 4, state: 'x' } } }),
    );
    const original = await waitForRun(f, d.body.workflow_run_id);
    const before = await f.api.get(`${API}/workflow_runs?filter[replay_of]=${original.id}`);
    const r = await f.api.post(`${API}/workflow_runs/${original.id}/replay`, {
      data: { type: 'workflow_run', attributes: { payload: { order: { id: 'other' } } } },
    });
    assert.equal(r.status, 422, r.text);
    assert.equal(r.body.errors[0].source.pointer, '/data');
    assert.match(r.body.errors[0].detail, /A replay takes only meta/);
    const after = await f.api.get(`${API}/workflow_runs?filter[replay_of]=${original.id}`);
    assert.equal(after.body.data.length, before.body.data.length);
  });

  it('includes the workflow of a run and the runs of a workflow', async () => {
    const runs = await f.api.get(`${API}/workflow_runs?include=workflow&filter[status]=succeeded`);
    assert.equal(runs.status, 200, runs.text);
    assert.ok(runs.body.data.length >= 2);
    assert.equal(runs.body.included[0].type, 'workflow');
    const wf = await f.api.get(`${API}/workflows/${workflowId}?include=runs`);
    assert.equal(wf.status, 200, wf.text);
    assert.ok(wf.body.included.length >= 4);
    assert.ok(!wf.text.includes('tbwh_'), 'no trigger token in a read');
  });
});
