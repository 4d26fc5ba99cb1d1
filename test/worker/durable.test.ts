/**
 * Durable steps (docs/workflows.md, "Durable steps"): a succeeded http_request is recorded
 * before the next step starts, so a later step's retry, or an attempt that lost its lease
 * to another, resumes after it and never calls its provider again. Each step record says
 * which attempt ran it and how many attempts ran it. A replay is a new run: it starts at
 * the first step and calls the provider again.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, describe, it } from 'node:test';
import { API, deliver, saveOk, startFlow, waitForRun, type Flow } from '../webhooks/helpers.ts';
import { mockProvider } from '../connectors/mock-provider.ts';
import { checkpointRuns, finishRuns, reclaimExpired } from '../../src/runs/queue.sql.ts';

const RETRY_MS = 300;
const f: Flow = await startFlow({ ALLOW_PRIVATE_EGRESS: 'true', RUN_MAX_ATTEMPTS: '3', RUN_RETRY_SCHEDULE: `${RETRY_MS}ms` }, { worker: true });
const mock = await mockProvider();
after(() => mock.close());

/** A provider whose first GET /health is held until the test lets it go; later ones answer at once. */
let letGo: (() => void) | undefined;
let held = 0;
const slow = http.createServer((req, res) => {
  req.resume();
  const answer = () => res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
  if (held++ === 0) letGo = answer;
  else answer();
});
await new Promise<void>((resolve) => slow.listen(0, '127.0.0.1', resolve));
after(async () => {
  slow.closeAllConnections();
  await new Promise((resolve) => slow.close(resolve));
});

async function connector(name: string, baseUrl: string): Promise<string> {
  const c = await f.api.post(`${API}/external_connectors`, {
    data: {
      type: 'external_connector',
      attributes: { name, direction: 'outbound', provider_slug: 'tributary-orders', secret: `key_${'d'.repeat(40)}`, config: { base_url: baseUrl } },
    },
  });
  assert.equal(c.status, 201, c.text);
  return c.body.data.id;
}
const orders = await connector('Orders', `${mock.url}/v1`);
const slowOrders = await connector('Slow orders', `http://127.0.0.1:${(slow.address() as AddressInfo).port}`);

const create = {
  key: 'create',
  type: 'http_request',
  config: { connector_id: orders, operation_ref: 'createOrder', body: '{"customer_id": payload.id, "items": []}' },
};
const shape = { key: 'shape', type: 'transform', config: { expression: 'steps.create.body.id' } };
const pay = {
  key: 'pay',
  type: 'http_request',
  config: { connector_id: orders, operation_ref: 'updateOrderStatus', params: { order_id: 'steps.shape' }, body: '{"status": "paid"}' },
};
const ORDER = { id: 'ord_abcdefgh', status: 'open' };
const creates = () => mock.requests.filter((r) => r.method === 'POST' && r.path === '/v1/orders').length;
const pays = () => mock.requests.filter((r) => r.method === 'PATCH' && r.path === `/v1/orders/${ORDER.id}`).length;

async function start(steps: unknown[], payload: unknown): Promise<string> {
  const { tokens } = await saveOk(f, { step_params: steps });
  const d = await deliver(f, `/api/v1/webhooks/${tokens.hook}`, JSON.stringify(payload));
  assert.equal(d.status, 202, d.text);
  return d.body.workflow_run_id;
}
const row = (id: string) => f.t.deps.db.selectFrom('workflow_runs').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
async function until(id: string, ok: (r: Awaited<ReturnType<typeof row>>) => boolean) {
  const deadline = Date.now() + 15_000;
  for (;;) {
    const r = await row(id);
    if (ok(r)) return r;
    if (Date.now() > deadline) assert.fail(`run ${id}: ${JSON.stringify(r)}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe('durable steps', () => {
  it("a provider 503 at step 3, retried, does not call step 1's provider again", async () => {
    mock.script('/v1/orders', { status: 201, body: ORDER });
    mock.script(`/v1/orders/${ORDER.id}`, { status: 503 }, { status: 200, body: { ...ORDER, status: 'paid' } });
    const [c0, p0] = [creates(), pays()];
    const id = await start([create, shape, pay], { id: 'cus_1' });
    const retrying = await until(id, (r) => r.status === 'retrying');
    assert.deepEqual(
      retrying.checkpoint?.steps.map((s) => [s.key, s.status, s.attempt]),
      [
        ['create', 'succeeded', 1],
        ['shape', 'succeeded', 1],
      ],
      'the steps before the failed one are what the next attempt resumes after',
    );
    const run: any = (await waitForRun(f, id)).attributes;
    assert.equal(run.outcome, 'completed');
    assert.equal(run.attempt, 2);
    assert.equal(creates() - c0, 1, "step 1's provider was called once");
    assert.equal(pays() - p0, 2, "step 3's provider was called again by the retry");
    const [c, s, p] = run.steps;
    assert.deepEqual([c.key, c.status, c.attempt, c.attempts], ['create', 'succeeded', 1, 1]);
    assert.deepEqual([s.key, s.status, s.attempt, s.attempts], ['shape', 'succeeded', 1, 1]);
    assert.deepEqual([p.key, p.status, p.attempt, p.attempts], ['pay', 'succeeded', 2, 2]);
    assert.equal(s.output, ORDER.id, "the later steps read step 1's output from the checkpoint");
    assert.ok(Date.parse(p.started_at) - Date.parse(c.finished_at) >= RETRY_MS, 'step 1 was not run by the second attempt');
    assert.deepEqual(c, retrying.checkpoint!.steps[0], 'step 1 keeps the record of the attempt that ran it, its times too');
    assert.equal((await row(id)).checkpoint, null, 'an ended run keeps no checkpoint');
  });

  it('a failed-then-retried step shows its attempts; a step that failed for good too', async () => {
    mock.script(`/v1/orders/${ORDER.id}`, { status: 503 }, { status: 503 }, { status: 503 });
    const id = await start(
      [shape, pay].map((s) => (s.key === 'shape' ? { ...s, config: { expression: `"${ORDER.id}"` } } : s)),
      {},
    );
    const run: any = (await waitForRun(f, id)).attributes;
    assert.equal(run.outcome, 'dead_letter');
    assert.deepEqual(
      run.steps.map((s: any) => [s.key, s.status, s.attempt, s.attempts]),
      [
        ['shape', 'succeeded', 1, 1],
        ['pay', 'failed', 3, 3],
      ],
    );
  });

  it('a lost lease: the attempt that takes the run over resumes from the checkpoint; the old one records nothing', async () => {
    mock.script('/v1/orders', { status: 201, body: ORDER });
    const wait = { key: 'wait', type: 'http_request', config: { connector_id: slowOrders, operation_ref: 'getHealth' } };
    const c0 = creates();
    const id = await start([create, wait, shape], { id: 'cus_2' });
    // Step 1 succeeded and is recorded; step 2 is held by the provider.
    const running = await until(id, (r) => r.checkpoint?.steps.length === 1 && letGo !== undefined);
    assert.equal(running.status, 'running');
    // The lease runs out as if the worker had stopped: reclaimed at a time past it, then ready at once.
    const past = new Date(running.locked_until!.getTime() + 1000);
    assert.equal(await reclaimExpired(f.t.deps.db, past, 10), 1);
    await f.t.deps.db.updateTable('workflow_runs').set({ run_at: new Date() }).where('id', '=', id).execute();
    f.t.deps.queueSignal.wake();
    const run: any = (await waitForRun(f, id)).attributes;
    assert.equal(run.outcome, 'completed');
    assert.equal(run.attempt, 2);
    assert.equal(creates() - c0, 1, "step 1's provider was not called again");
    assert.deepEqual(
      run.steps.map((s: any) => [s.key, s.attempt]),
      [
        ['create', 1],
        ['wait', 2],
        ['shape', 2],
      ],
    );
    // The first attempt now gets its answer, too late: what it would record is refused.
    letGo!();
    await new Promise((resolve) => setTimeout(resolve, 300));
    const after = await row(id);
    assert.equal(after.status, 'succeeded');
    assert.deepEqual(after.steps, run.steps);
  });

  it('a checkpoint and an outcome are written only by the attempt that holds the run: its worker, at its attempt', async () => {
    const id = await start([{ ...shape, config: { expression: '1' } }], {});
    await waitForRun(f, id);
    // Held by worker w-1 at its attempt 3, as a claim leaves it.
    await f.t.deps.db.updateTable('workflow_runs').set({ status: 'running', locked_by: 'w-1', attempt: 3, checkpoint: null }).where('id', '=', id).execute();
    const checkpoint = { steps: [], tries: { shape: 1 } };
    const now = new Date();
    assert.equal((await checkpointRuns(f.t.deps.db, 'w-2', [{ id, attempt: 3, checkpoint }], now)).size, 0, 'another worker');
    assert.equal((await checkpointRuns(f.t.deps.db, 'w-1', [{ id, attempt: 2, checkpoint }], now)).size, 0, 'an older attempt of the same worker');
    assert.equal((await row(id)).checkpoint, null);
    assert.deepEqual([...(await checkpointRuns(f.t.deps.db, 'w-1', [{ id, attempt: 3, checkpoint }], now))], [id]);
    assert.deepEqual((await row(id)).checkpoint, checkpoint);
    const outcome = { status: 'succeeded' as const, outcome: 'completed' as const, steps: [], error: null, factsWritten: 0 };
    assert.equal((await finishRuns(f.t.deps.db, 'w-1', [{ id, attempt: 2, outcome }], now)).size, 0, 'an older attempt cannot end the run');
    assert.deepEqual([...(await finishRuns(f.t.deps.db, 'w-1', [{ id, attempt: 3, outcome }], now))], [id]);
    const ended = await row(id);
    assert.equal(ended.status, 'succeeded');
    assert.equal(ended.checkpoint, null, 'an ended run drops its checkpoint');
  });

  it('a replay is a new run: it starts at the first step and calls the provider again', async () => {
    mock.script('/v1/orders', { status: 201, body: ORDER });
    mock.script(`/v1/orders/${ORDER.id}`, { status: 200, body: { ...ORDER, status: 'paid' } });
    const id = await start([create, shape, pay], { id: 'cus_3' });
    assert.equal((await waitForRun(f, id)).attributes.outcome, 'completed');
    const [c0, p0] = [creates(), pays()];
    mock.script('/v1/orders', { status: 201, body: ORDER });
    mock.script(`/v1/orders/${ORDER.id}`, { status: 200, body: { ...ORDER, status: 'paid' } });
    const r = await f.api.post(`${API}/workflow_runs/${id}/replay`, undefined);
    assert.equal(r.status, 201, r.text);
    const replay = (await waitForRun(f, r.body.data.id)).attributes;
    assert.equal(replay.outcome, 'completed');
    assert.equal(creates() - c0, 1);
    assert.equal(pays() - p0, 1);
    assert.deepEqual(
      replay.steps.map((s: any) => [s.key, s.attempt, s.attempts]),
      [
        ['create', 1, 1],
        ['shape', 1, 1],
        ['pay', 1, 1],
      ],
    );
  });
});
