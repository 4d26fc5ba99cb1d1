/**
 * The engine's edges (docs/workflows.md, "for_each", "on_failure", "wait_for_delivery",
 * "Sizes"): a wait inside a switch branch parks and resumes inside the branch once; a
 * wait_for_delivery's on_timeout steps run once when the timeout comes first and not when a
 * delivery matches; a for_each runs on the items it began with at every attempt; a run
 * whose last attempt loses its worker runs its on_failure steps; a for_each of 1,000 large
 * outputs keeps its checkpoint and its output bounded, and nested records cannot make the
 * run's record exceed RUN_STEPS_MAX_BYTES. The worker runs on a clock the test moves.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'kysely';
import { API, deliver, saveOk, startFlow, type Flow } from '../webhooks/helpers.ts';
import { mockProvider } from '../connectors/mock-provider.ts';
import { startWorker } from '../../src/worker/worker.ts';
import { LEASE_LOST, reclaimExpired } from '../../src/runs/queue.sql.ts';
import { cutText, jsonBytes, PREVIEW_BYTES } from '../../src/runs/run-record.ts';

const OUTPUT_CAP = 1024;
const f: Flow = await startFlow(
  {
    ALLOW_PRIVATE_EGRESS: 'true',
    WORKER_POLL_MS: '20',
    RUN_MAX_ATTEMPTS: '3',
    RUN_RETRY_SCHEDULE: '50ms',
    RUN_STEP_OUTPUT_MAX_BYTES: String(OUTPUT_CAP),
    WEBHOOK_RATE_LIMIT_MAX: '100000',
  },
  { worker: false },
);
const mock = await mockProvider();
after(() => mock.close());

let offset = 0;
const clock = () => Date.now() + offset;
const worker = startWorker({ ...f.t.deps, clock });
after(() => worker.stop(0));

const c = await f.api.post(`${API}/external_connectors`, {
  data: {
    type: 'external_connector',
    attributes: {
      name: 'Orders',
      direction: 'outbound',
      provider_slug: 'tributary-orders',
      secret: `key_${'d'.repeat(40)}`,
      config: { base_url: `${mock.url}/v1` },
    },
  },
});
assert.equal(c.status, 201, c.text);
const orders: string = c.body.data.id;
const create = (key: string, tag: string) => ({
  key,
  type: 'http_request',
  config: { connector_id: orders, operation_ref: 'createOrder', body: `{"customer_id": payload.id & "-${tag}", "items": []}` },
});
const mark = (key: string, orderId: string) => ({
  key,
  type: 'http_request',
  config: { connector_id: orders, operation_ref: 'updateOrderStatus', params: { order_id: orderId }, body: '{"status": "paid"}' },
});
const creates = (id: string) => mock.requests.filter((r) => r.method === 'POST' && r.path === '/v1/orders' && r.body.includes(`"${id}"`)).length;
const patches = (order: string) => mock.requests.filter((r) => r.method === 'PATCH' && r.path === `/v1/orders/${order}`).length;

const triggers = () => [
  { key: 'hook', type: 'webhook', service_account_id: f.tenant.credentialId },
  { key: 'orders', type: 'webhook', service_account_id: f.tenant.credentialId },
];
async function start(
  steps: unknown[],
  payload: unknown,
  more: { on_failure_params?: unknown[] } = {},
): Promise<{ id: string; tokens: Record<string, string> }> {
  const { tokens } = await saveOk(f, { step_params: steps, trigger_params: triggers(), ...more });
  const d = await deliver(f, `/api/v1/webhooks/${tokens.hook}`, JSON.stringify(payload));
  assert.equal(d.status, 202, d.text);
  return { id: d.body.workflow_run_id, tokens };
}
const row = (id: string) => f.t.deps.db.selectFrom('workflow_runs').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
async function until(id: string, ok: (r: Awaited<ReturnType<typeof row>>) => boolean, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = await row(id);
    if (ok(r)) return r;
    if (Date.now() > deadline) assert.fail(`run ${id}: ${JSON.stringify(r).slice(0, 4000)}`);
    await sleep(20);
  }
}
const finished = (r: { status: string }) => r.status === 'succeeded' || r.status === 'failed';
/** Moves the worker's clock past a parked run's resume_at. */
function pastResume(r: { resume_at: Date | null }) {
  offset = new Date(r.resume_at!).getTime() - Date.now() + 1000;
}

describe('a wait inside a switch branch', () => {
  it('parks and resumes inside the branch exactly once', async () => {
    const { id } = await start(
      [
        {
          key: 'route',
          type: 'switch',
          config: {
            cases: [
              {
                when: 'payload.kind = "order"',
                steps: [create('open', 'open'), { key: 'pause', type: 'delay', config: { duration: '"1h"' } }, create('close', 'close')],
              },
            ],
            default: [{ key: 'other', type: 'transform', config: { expression: '"no"' } }],
          },
        },
        { key: 'after', type: 'transform', config: { expression: 'steps.route.status' } },
      ],
      { id: 'sw-wait', kind: 'order' },
    );
    const parked = await until(id, (r) => r.status === 'waiting');
    assert.deepEqual(
      (parked.steps as any[]).map((s) => [s.key, s.status, s.branch ?? null]),
      [['route', 'waiting', 0]],
    );
    assert.deepEqual(
      (parked.steps as any[])[0].steps.map((s: any) => [s.key, s.status]),
      [
        ['open', 'succeeded'],
        ['pause', 'waiting'],
      ],
    );
    assert.equal(creates('sw-wait-open'), 1);
    assert.equal(creates('sw-wait-close'), 0);
    pastResume(parked);
    const done = await until(id, finished);
    assert.equal(done.status, 'succeeded', JSON.stringify(done.steps));
    assert.equal(done.attempt, 1);
    const route = (done.steps as any[])[0];
    assert.equal(route.branch, 0);
    assert.deepEqual(
      route.steps.map((s: any) => [s.key, s.status]),
      [
        ['open', 'succeeded'],
        ['pause', 'succeeded'],
        ['close', 'succeeded'],
      ],
    );
    assert.equal((done.steps as any[])[1].output, 200, "after the switch, its output is the branch's last");
    await sleep(200);
    assert.equal(creates('sw-wait-open'), 1, 'the step before the wait ran once');
    assert.equal(creates('sw-wait-close'), 1, 'the step after the wait ran once');
    offset = 0;
  });
});

describe("wait_for_delivery's on_timeout steps", () => {
  // The docs' example, with this test's connector.
  const text = readFileSync(new URL('../../docs/workflows.md', import.meta.url), 'utf8');
  const block = /<!-- on-timeout-steps -->\s*```json\n([\s\S]*?)```/.exec(text);
  assert.ok(block, 'docs/workflows.md has the on_timeout steps example');
  const paid = JSON.parse(block[1]!.replaceAll('<connector id>', orders));
  const steps = [
    { key: 'order', type: 'transform', config: { expression: 'payload' } },
    paid,
    { key: 'after', type: 'transform', config: { expression: 'steps.paid' } },
  ];
  const reminders = (order: string) => mock.requests.filter((r) => r.method === 'POST' && r.body.includes(`order ${order} unpaid after 1h`)).length;

  it('run once when the timeout comes first; the last one gives the output', async () => {
    const { id } = await start(steps, { id: 'ot-timeout', customer_id: 'cus_late' });
    const parked = await until(id, (r) => r.status === 'waiting');
    pastResume(parked);
    const done = await until(id, finished);
    assert.equal(done.status, 'succeeded', JSON.stringify(done.steps));
    const [, paid, afterIt] = done.steps as any[];
    assert.deepEqual(
      paid.steps.map((s: any) => [s.key, s.status]),
      [
        ['remind', 'succeeded'],
        ['unpaid', 'succeeded'],
      ],
    );
    assert.deepEqual(paid.output, { unpaid: 'ot-timeout', reminded: 200 });
    assert.deepEqual(afterIt.output, { unpaid: 'ot-timeout', reminded: 200 });
    await sleep(200);
    assert.equal(reminders('ot-timeout'), 1);
    offset = 0;
  });

  it('do not run when a delivery matches', async () => {
    const { id, tokens } = await start(steps, { id: 'ot-match', customer_id: 'cus_paid' });
    await until(id, (r) => r.status === 'waiting');
    const d = await deliver(f, `/api/v1/webhooks/${tokens.orders}`, JSON.stringify({ order_id: 'ot-match', amount: 5 }));
    assert.equal(d.status, 202, d.text);
    assert.equal(d.body.workflow_run_id, id);
    const done = await until(id, finished);
    assert.equal(done.status, 'succeeded', JSON.stringify(done.steps));
    const paid = (done.steps as any[])[1];
    assert.deepEqual(paid.output, { order_id: 'ot-match', amount: 5 });
    assert.equal(paid.steps, undefined);
    assert.equal(reminders('ot-match'), 0);
  });
});

describe('for_each pins its items', () => {
  it('a later attempt runs on the items the first one began with', async () => {
    mock.script('/v1/orders/ord_pinned02', { status: 503 }, { status: 200, body: { id: 'ord_pinned02', status: 'paid' } });
    const { id } = await start(
      [
        {
          key: 'loop',
          type: 'for_each',
          config: { items: 'run.attempt = 1 ? ["ord_pinned01", "ord_pinned02", "ord_pinned03"] : ["ord_pinned09"]', steps: [mark('pay', 'item')] },
        },
      ],
      {},
    );
    const done = await until(id, finished);
    assert.equal(done.status, 'succeeded', JSON.stringify(done.steps));
    assert.equal(done.attempt, 2);
    const loop = (done.steps as any[])[0];
    assert.equal(loop.items.count, 3);
    assert.equal(loop.output.length, 3);
    assert.deepEqual(['ord_pinned01', 'ord_pinned02', 'ord_pinned03', 'ord_pinned09'].map(patches), [1, 2, 1, 0]);
  });

  it('items too large to keep are checked by their hash: other items fail the step for good', async () => {
    mock.script('/v1/orders/ord_bigitem1', { status: 503 }, { status: 200, body: { id: 'ord_bigitem1', status: 'paid' } });
    const loop = (items: string) => ({
      key: 'loop',
      type: 'for_each',
      config: { items, steps: [{ key: 'first', type: 'condition', config: { expression: 'index = 0' } }, mark('pay', '"ord_bigitem1"')] },
    });
    const { id } = await start([loop('run.attempt = 1 ? [1..400] : [1..401]')], {});
    const done = await until(id, finished);
    assert.equal(done.status, 'failed');
    assert.equal(done.attempt, 2);
    assert.match(done.error!, /^Step loop failed: items gave other items than when the loop began \(400 then, 401 now\)/);
  });
});

describe('on_failure after a lost lease', () => {
  it('a run whose last attempt loses its worker runs its on_failure steps once, with the lease-lost failure', async () => {
    const { id } = await start(
      [
        { key: 'first', type: 'transform', config: { expression: '1' } },
        { key: 'pause', type: 'delay', config: { duration: '"1h"' } },
        { key: 'later', type: 'transform', config: { expression: '2' } },
      ],
      {},
      {
        on_failure_params: [{ key: 'tell', type: 'transform', config: { expression: '{"step": failure.step, "error": failure.error, "first": steps.first}' } }],
      },
    );
    await until(id, (r) => r.status === 'waiting');
    // Its last attempt was claimed by a worker that died: the lease ran out.
    await sql`update workflow_runs set status = 'running', attempt = max_attempts, locked_by = 'gone', locked_until = ${new Date(clock() - 60_000)},
      run_at = ${new Date(clock() - 60_000)}, resume_at = null where id = ${id}`.execute(f.t.deps.db);
    await reclaimExpired(f.t.deps.db, new Date(clock()), 5);
    const done = await until(id, finished);
    assert.equal(done.status, 'failed');
    assert.equal(done.outcome, 'dead_letter');
    assert.equal(done.attempt, 3, 'the on_failure attempt takes the lost one');
    assert.equal(done.error, LEASE_LOST);
    assert.deepEqual(
      (done.steps as any[]).map((s) => [s.key, s.status, s.on_failure ?? false]),
      [
        ['first', 'succeeded', false],
        ['pause', 'failed', false],
        ['later', 'skipped', false],
        ['tell', 'succeeded', true],
      ],
    );
    assert.deepEqual((done.steps as any[])[3].output, { step: 'pause', error: LEASE_LOST, first: 1 });
    assert.equal(done.checkpoint, null);
  });
});

describe('sizes of nested steps', () => {
  it('a for_each of 1,000 large outputs keeps its checkpoint and its output within bounds', async () => {
    mock.script('/v1/orders/ord_lastitem', { status: 503 }, { status: 200, body: { id: 'ord_lastitem', status: 'paid' } });
    const { id } = await start(
      [
        {
          key: 'loop',
          type: 'for_each',
          config: {
            items: '[0..999]',
            concurrency: 20,
            steps: [
              { key: 'gate', type: 'switch', config: { cases: [{ when: 'index = 999', steps: [mark('pay', '"ord_lastitem"')] }] } },
              { key: 'fill', type: 'transform', config: { expression: '$pad("", 900, "x")' } },
            ],
          },
        },
      ],
      {},
    );
    const retrying = await until(id, (r) => r.status === 'retrying' || finished(r));
    assert.equal(retrying.status, 'retrying', JSON.stringify(retrying.steps).slice(0, 2000));
    const progress = retrying.checkpoint!.progress!.loop as { done: Record<string, unknown> };
    assert.equal(Object.keys(progress.done).length, 999, 'the finished items are kept');
    // 999 outputs of 902 bytes would be 900 KB: past the output cap each item keeps its size, the first its preview's start.
    assert.ok(jsonBytes(retrying.checkpoint) < 80_000, `checkpoint of ${jsonBytes(retrying.checkpoint)} bytes`);
    const done = await until(id, finished);
    assert.equal(done.status, 'succeeded', JSON.stringify(done.steps).slice(0, 2000));
    const loop = (done.steps as any[])[0];
    assert.equal(loop.output_truncated, true);
    assert.equal(loop.output_bytes, 1 + 1000 + 1000 * 902, 'the full output, as JSON');
    assert.equal(loop.output, cutText(JSON.stringify(Array.from({ length: 1000 }, () => 'x'.repeat(900))), PREVIEW_BYTES), 'the preview of the whole output');
    assert.deepEqual(loop.items, { count: 1000, succeeded: 1000, stopped: 0, failed: 0, not_run: 0 });
  });

  it("nested records cannot make the run's steps exceed RUN_STEPS_MAX_BYTES", async () => {
    const fills = Array.from({ length: 30 }, (_, i) => ({ key: `fill_${i}`, type: 'transform', config: { expression: '$pad("", 1000, "y")' } }));
    const { id } = await start(
      [
        {
          key: 'route',
          type: 'switch',
          config: { cases: [{ when: 'true', steps: [{ key: 'loop', type: 'for_each', config: { items: '[0..9]', concurrency: 5, steps: fills } }] }] },
        },
      ],
      {},
    );
    const done = await until(id, finished);
    assert.equal(done.status, 'succeeded');
    // 10 items of 30 outputs of 1 KB each, shown in the record: 300 KB before the cap.
    assert.ok(jsonBytes(done.steps) <= f.t.deps.config.runRecord.stepsBytes, `${jsonBytes(done.steps)} bytes`);
    const items = (done.steps as any[])[0].steps[0].item_records;
    assert.equal(items.length, 10);
    assert.ok(items.some((it: any) => it.steps.some((s: any) => s.output_truncated)));
  });
});
