/**
 * Control flow (docs/workflows.md, "switch", "for_each", "on_failure"): a switch routes by
 * a delivery header and records the branch it ran; a for_each runs its steps per item with
 * each finished item checkpointed, so a 503 at item 3 is retried without calling items 1-2
 * (or the steps before the loop) again; a switch holding a for_each of write_fact steps
 * writes each fact once however often it runs (a replay too); on_failure steps run once,
 * with the failure in their context, on a permanent failure and on a dead letter.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, describe, it } from 'node:test';
import YAML from 'yaml';
import { API, createModel, deliver, saveOk, startFlow, waitForRun, type Flow } from '../webhooks/helpers.ts';
import { mockProvider } from '../connectors/mock-provider.ts';

const f: Flow = await startFlow({ ALLOW_PRIVATE_EGRESS: 'true', RUN_MAX_ATTEMPTS: '3', RUN_RETRY_SCHEDULE: '50ms' }, { worker: true });
const mock = await mockProvider();
after(() => mock.close());

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
await createModel(f, 'lines', [
  { name: 'line_id', type: 'string' },
  { name: 'qty', type: 'integer' },
]);

async function start(steps: unknown[], payload: unknown, headers: Record<string, string> = {}, onFailure?: unknown[]): Promise<string> {
  const { tokens } = await saveOk(f, { step_params: steps, ...(onFailure ? { on_failure_params: onFailure } : {}) });
  const d = await deliver(f, `/api/v1/webhooks/${tokens.hook}`, JSON.stringify(payload), headers);
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
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}
const calls = (path: string, method = 'PATCH') => mock.requests.filter((r) => r.method === method && r.path === path).length;

/** The docs' first switch example, as docs/workflows.md shows it (a workflow file's `steps:`). */
function docsRouter(): unknown[] {
  const text = readFileSync(new URL('../../docs/workflows.md', import.meta.url), 'utf8');
  const block = /<!-- github-router -->\s*```yaml\n([\s\S]*?)```/.exec(text);
  assert.ok(block, 'docs/workflows.md has the GitHub router example');
  const doc = YAML.parse(block[1]!) as { steps: Record<string, any> };
  const toApi = (steps: Record<string, any>): unknown[] =>
    Object.entries(steps).map(([key, { type, ...config }]) => {
      if (type === 'switch') {
        config.cases = config.cases.map((k: any) => ({ ...k, steps: toApi(k.steps) }));
        config.default = toApi(config.default ?? {});
      }
      if (type === 'for_each') config.steps = toApi(config.steps);
      return { key, type, config };
    });
  return toApi(doc.steps);
}

describe('switch', () => {
  it('routes a GitHub delivery by its x-github-event header, and records the branch and its steps', async () => {
    const steps = docsRouter();
    const seen: Record<string, any> = {};
    for (const event of ['push', 'issues', 'ping', 'star']) {
      const id = await start(steps, { ref: 'refs/heads/main', action: 'opened', zen: 'Keep it simple' }, { 'x-github-event': event });
      seen[event] = (await waitForRun(f, id)).attributes;
    }
    for (const run of Object.values(seen)) assert.equal(run.outcome, 'completed');
    const route = (e: string) => seen[e].steps.find((s: any) => s.key === 'route');
    assert.equal(route('push').branch, 0);
    assert.equal(route('issues').branch, 1);
    assert.equal(route('ping').branch, 2);
    assert.equal(route('star').branch, 'default');
    assert.deepEqual(
      route('push').steps.map((s: any) => [s.key, s.status]),
      [['on_push', 'succeeded']],
    );
    assert.deepEqual(route('push').output, route('push').steps[0].output, "the switch's output is its branch's last output");
    assert.deepEqual(
      route('star').steps.map((s: any) => s.key),
      ['ignored'],
    );
  });

  it('a false condition inside a branch stops the branch only; the steps after the switch run', async () => {
    const id = await start(
      [
        {
          key: 'route',
          type: 'switch',
          config: {
            cases: [
              {
                when: 'true',
                steps: [
                  { key: 'gate', type: 'condition', config: { expression: 'false' } },
                  { key: 'never', type: 'transform', config: { expression: '1' } },
                ],
              },
            ],
          },
        },
        { key: 'after', type: 'transform', config: { expression: '"ran"' } },
      ],
      {},
    );
    const run = (await waitForRun(f, id)).attributes;
    assert.equal(run.outcome, 'completed');
    assert.deepEqual(
      run.steps[0].steps.map((s: any) => [s.key, s.status, s.reason ?? null]),
      [
        ['gate', 'succeeded', null],
        ['never', 'skipped', 'condition false at step gate'],
      ],
    );
    assert.equal(run.steps[1].output, 'ran');
  });
});

describe('for_each', () => {
  const ids = ['ord_aaaaaaa1', 'ord_aaaaaaa2', 'ord_aaaaaaa3', 'ord_aaaaaaa4', 'ord_aaaaaaa5'];
  const loop = (concurrency: number) => ({
    key: 'loop',
    type: 'for_each',
    config: {
      items: 'payload.orders',
      concurrency,
      steps: [
        {
          key: 'mark',
          type: 'http_request',
          config: { connector_id: orders, operation_ref: 'updateOrderStatus', params: { order_id: 'item' }, body: '{"status": steps.status}' },
        },
        { key: 'shape', type: 'transform', config: { expression: '{"id": item, "index": index, "status": steps.mark.status}' } },
      ],
    },
  });
  const before = {
    key: 'first',
    type: 'http_request',
    config: { connector_id: orders, operation_ref: 'createOrder', body: '{"customer_id": "cus_1", "items": []}' },
  };
  const status = { key: 'status', type: 'transform', config: { expression: '"paid"' } };

  for (const concurrency of [1, 3]) {
    it(`a 503 at item 3 is retried without calling items 1-2 or the steps before the loop again (concurrency ${concurrency})`, async () => {
      mock.script('/v1/orders', { status: 201, body: { id: 'ord_created1', status: 'open' } });
      for (const [i, o] of ids.entries())
        mock.script(`/v1/orders/${o}`, ...(i === 2 ? [{ status: 503 }] : []), { status: 200, body: { id: o, status: 'paid' } });
      const c0 = calls('/v1/orders', 'POST');
      const p0 = ids.map((o) => calls(`/v1/orders/${o}`));
      const id = await start([before, status, loop(concurrency)], { orders: ids });
      const retrying = await until(id, (r) => r.status === 'retrying' || r.status === 'succeeded');
      assert.equal(retrying.status, 'retrying');
      const done = (retrying.checkpoint?.progress?.loop as { done: Record<string, unknown> } | undefined)?.done ?? {};
      assert.ok(Object.keys(done).includes('0') && Object.keys(done).includes('1'), 'items 1 and 2 are kept with the checkpoint');
      const run = (await waitForRun(f, id)).attributes;
      assert.equal(run.outcome, 'completed', JSON.stringify(run.steps));
      assert.equal(run.attempt, 2);
      assert.equal(calls('/v1/orders', 'POST') - c0, 1, 'the step before the loop was called once');
      assert.deepEqual(
        ids.map((o, i) => calls(`/v1/orders/${o}`) - p0[i]!),
        [1, 1, 2, 1, 1],
        'only item 3 was called again',
      );
      const record = run.steps.find((s: any) => s.key === 'loop');
      assert.deepEqual(
        record.output.map((o: any) => [o.id, o.index, o.status]),
        ids.map((o, i) => [o, i, 200]),
      );
      assert.deepEqual(record.items, { count: 5, succeeded: 5, stopped: 0, failed: 0, not_run: 0 });
      // Items 1-2 keep the records of the attempt that ran them; with concurrency, items after 3 may have run at attempt 1 too.
      assert.deepEqual(
        record.item_records.map((it: any) => [
          it.index,
          it.status,
          it.steps[0].key,
          concurrency === 1 || it.index < 2 ? it.steps[0].attempt : 'any',
          it.steps[0].attempts,
        ]),
        [
          [0, 'succeeded', 'mark', 1, 1],
          [1, 'succeeded', 'mark', 1, 1],
          [2, 'succeeded', 'mark', concurrency === 1 ? 2 : 'any', 2],
          [3, 'succeeded', 'mark', concurrency === 1 ? 2 : 'any', 1],
          [4, 'succeeded', 'mark', concurrency === 1 ? 2 : 'any', 1],
        ],
      );
      assert.equal(record.item_records[2].steps[0].attempts, 2, "item 3's call shows both attempts");
    });
  }
});

describe('switch, for_each and replay', () => {
  it('write each fact once', async () => {
    const lines = [
      { id: 'l1', qty: 1 },
      { id: 'l2', qty: 2 },
      { id: 'l3', qty: 3 },
    ];
    const steps = [
      {
        key: 'kind',
        type: 'switch',
        config: {
          cases: [
            {
              when: 'payload.kind = "order"',
              steps: [
                {
                  key: 'each_line',
                  type: 'for_each',
                  config: {
                    items: 'payload.lines',
                    concurrency: 2,
                    steps: [{ key: 'store', type: 'write_fact', config: { data_model_slug: 'lines', mapping: { line_id: 'item.id', qty: 'item.qty' } } }],
                  },
                },
              ],
            },
          ],
          default: [{ key: 'other', type: 'transform', config: { expression: '"not an order"' } }],
        },
      },
    ];
    const facts = async () =>
      Number(
        (
          await f.t.deps.db
            .selectFrom('facts')
            .select((eb) => eb.fn.countAll().as('n'))
            .executeTakeFirstOrThrow()
        ).n,
      );
    const n0 = await facts();
    const id = await start(steps, { kind: 'order', lines });
    const run = (await waitForRun(f, id)).attributes;
    assert.equal(run.outcome, 'completed');
    assert.equal(run.facts_written, 3);
    assert.equal((await facts()) - n0, 3);
    const replay = await f.api.post(`${API}/workflow_runs/${id}/replay`, undefined);
    assert.equal(replay.status, 201, replay.text);
    const again = (await waitForRun(f, replay.body.data.id)).attributes;
    assert.equal(again.outcome, 'completed');
    assert.equal(again.facts_written, 0, 'the replay stores none again');
    assert.equal((await facts()) - n0, 3, 'each fact once');
    const stored = await f.t.deps.db.selectFrom('facts').select('source_key').orderBy('source_key').execute();
    assert.equal(new Set(stored.map((s) => s.source_key)).size, stored.length);
    assert.ok(
      stored.some((s) => s.source_key?.includes(':each_line[2].store:0')),
      "an item's facts are keyed by its instance",
    );
  });
});

describe('on_failure', () => {
  const notify = (key: string) => ({
    key,
    type: 'http_request',
    config: {
      connector_id: orders,
      operation_ref: 'createOrder',
      body: '{"customer_id": "cus_fail", "items": [], "note": failure.step & ": " & failure.error}',
    },
  });
  const said = () => mock.requests.filter((r) => r.method === 'POST' && r.path === '/v1/orders' && r.body.includes('cus_fail'));

  it('runs once with the failure in its context on a permanent failure', async () => {
    mock.script('/v1/orders', { status: 201, body: { id: 'ord_notified1', status: 'open' } });
    const n0 = said().length;
    const id = await start(
      [
        { key: 'ok', type: 'transform', config: { expression: '1' } },
        { key: 'boom', type: 'transform', config: { expression: '$error("no such customer")' } },
        { key: 'later', type: 'transform', config: { expression: '2' } },
      ],
      {},
      {},
      [notify('tell'), { key: 'seen', type: 'transform', config: { expression: '{"step": failure.step, "ok": steps.ok}' } }],
    );
    const run = (await waitForRun(f, id)).attributes;
    assert.equal(run.status, 'failed');
    assert.equal(run.outcome, 'failed');
    assert.deepEqual(
      run.steps.map((s: any) => [s.key, s.status, s.on_failure ?? false]),
      [
        ['ok', 'succeeded', false],
        ['boom', 'failed', false],
        ['later', 'skipped', false],
        ['tell', 'succeeded', true],
        ['seen', 'succeeded', true],
      ],
    );
    assert.deepEqual(run.steps[4].output, { step: 'boom', ok: 1 });
    assert.equal(said().length - n0, 1);
    assert.match(said().at(-1)!.body, /boom: .*no such customer/);
  });

  it('runs once on a dead letter, after the last attempt; a failing on_failure step is recorded and the run stays failed', async () => {
    mock.script('/v1/orders/ord_deadlet1', { status: 503 }, { status: 503 }, { status: 503 });
    mock.script('/v1/orders', { status: 201, body: { id: 'ord_notified2', status: 'open' } });
    const n0 = said().length;
    const id = await start(
      [
        {
          key: 'pay',
          type: 'http_request',
          config: { connector_id: orders, operation_ref: 'updateOrderStatus', params: { order_id: '"ord_deadlet1"' }, body: '{"status": "paid"}' },
        },
      ],
      {},
      {},
      [notify('tell'), { key: 'broken', type: 'transform', config: { expression: '$error("on_failure too")' } }],
    );
    const run = (await waitForRun(f, id)).attributes;
    assert.equal(run.outcome, 'dead_letter');
    assert.equal(run.attempt, 3);
    assert.equal(said().length - n0, 1, 'on_failure ran once, not at each attempt');
    assert.deepEqual(
      run.steps.map((s: any) => [s.key, s.status, s.on_failure ?? false]),
      [
        ['pay', 'failed', false],
        ['tell', 'succeeded', true],
        ['broken', 'failed', true],
      ],
    );
    assert.match(run.error, /^Step pay failed/, "the run's error is its own step's");
  });
});

describe('a test run', () => {
  it('shows which branch ran and each item, with the facts each item would store', async () => {
    const { workflow } = await saveOk(f, {
      step_params: [
        {
          key: 'kind',
          type: 'switch',
          config: {
            cases: [
              {
                when: 'payload.kind = "order"',
                steps: [
                  {
                    key: 'each_line',
                    type: 'for_each',
                    config: {
                      items: 'payload.lines',
                      steps: [
                        { key: 'big', type: 'condition', config: { expression: 'item.qty > 1' } },
                        { key: 'store', type: 'write_fact', config: { data_model_slug: 'lines', mapping: { line_id: 'item.id', qty: 'item.qty' } } },
                      ],
                    },
                  },
                ],
              },
            ],
          },
        },
      ],
    });
    const r = await f.api.post(`${API}/workflows/${workflow.id}/test_run`, {
      data: {
        type: 'workflow_test_run',
        attributes: {
          payload: {
            kind: 'order',
            lines: [
              { id: 'l1', qty: 1 },
              { id: 'l2', qty: 2 },
            ],
          },
        },
      },
    });
    assert.equal(r.status, 200, r.text);
    const a = r.body.data.attributes;
    assert.equal(a.outcome, 'completed');
    assert.equal(a.facts_would_write, 1);
    const kind = a.steps[0];
    assert.equal(kind.branch, 0);
    const loop = kind.steps[0];
    assert.equal(loop.type, 'for_each');
    assert.deepEqual(loop.items, { count: 2, succeeded: 1, stopped: 1, failed: 0, not_run: 0 });
    assert.deepEqual(
      loop.item_records.map((it: any) => [it.index, it.status, it.steps.map((s: any) => [s.key, s.status])]),
      [
        [
          0,
          'stopped',
          [
            ['big', 'succeeded'],
            ['store', 'skipped'],
          ],
        ],
        [
          1,
          'succeeded',
          [
            ['big', 'succeeded'],
            ['store', 'succeeded'],
          ],
        ],
      ],
    );
    assert.deepEqual(loop.item_records[1].steps[1].facts[0].data, { line_id: 'l2', qty: 2 });
    assert.equal(await f.t.deps.db.selectFrom('workflow_runs').select('id').where('workflow_id', '=', workflow.id).executeTakeFirst(), undefined);
  });
});
