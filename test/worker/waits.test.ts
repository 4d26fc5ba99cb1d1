/**
 * Waits that hold nothing (docs/workflows.md, "Waits"): a delay parks its run (waiting,
 * resume_at, no lease) and any worker resumes it once at its time; 1,000 parked runs hold
 * no worker slot or lease and all resume; wait_for_delivery is resumed by the one delivery
 * its match takes (which starts no run of its own) or times out; a waiting run can be
 * cancelled and never resumes. The worker runs on a clock the test moves.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { API, deliver, saveOk, startFlow, type Flow } from '../webhooks/helpers.ts';
import { mockProvider } from '../connectors/mock-provider.ts';
import { startWorker } from '../../src/worker/worker.ts';
import { sql } from 'kysely';

const f: Flow = await startFlow(
  { ALLOW_PRIVATE_EGRESS: 'true', WORKER_POLL_MS: '20', WORKER_CONCURRENCY: '4', WEBHOOK_RATE_LIMIT_MAX: '100000' },
  { worker: false },
);
const mock = await mockProvider();
after(() => mock.close());

// The worker's clock: the test moves it past a wait instead of sleeping through it.
let offset = 0;
const clock = () => Date.now() + offset;
let worker = startWorker({ ...f.t.deps, clock });
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
const create = {
  key: 'create',
  type: 'http_request',
  config: { connector_id: c.body.data.id, operation_ref: 'createOrder', body: '{"customer_id": payload.id, "items": []}' },
};
const creates = (id: string) => mock.requests.filter((r) => r.method === 'POST' && r.path === '/v1/orders' && JSON.stringify(r.body).includes(id)).length;

const row = (id: string) => f.t.deps.db.selectFrom('workflow_runs').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
async function until<T>(what: string, get: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await get();
    if (ok(v)) return v;
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}: ${JSON.stringify(v)}`);
    await sleep(20);
  }
}
/**
 * What the process holds of the database over about a second (50 samples): the most pool
 * clients in use and waiting and, on PostgreSQL, the most of this database's other sessions
 * busy (running a statement or inside a transaction) and inside a transaction.
 */
async function connectionsHeld(): Promise<{ inUse: number; waiting: number; backends?: number; inTransaction?: number }> {
  let inUse = 0;
  let waiting = 0;
  let backends: number | undefined;
  let inTransaction: number | undefined;
  for (let i = 0; i < 50; i++) {
    const pool = f.t.deps.databasePool();
    inUse = Math.max(inUse, pool.inUse);
    waiting = Math.max(waiting, pool.waiting);
    if (f.t.deps.engine === 'postgres') {
      const { rows } = await sql<{ busy: number; in_tx: number }>`
        select count(*) filter (where state <> 'idle')::int as busy, count(*) filter (where state like 'idle in transaction%')::int as in_tx
        from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid() and backend_type = 'client backend'`.execute(f.t.deps.db);
      backends = Math.max(backends ?? 0, rows[0]!.busy);
      inTransaction = Math.max(inTransaction ?? 0, rows[0]!.in_tx);
    }
    await sleep(20);
  }
  return { inUse, waiting, ...(backends === undefined ? {} : { backends, inTransaction }) };
}
const runOf = async (id: string) => (await f.api.get(`${API}/workflow_runs/${id}`)).body.data.attributes;

async function workflow(steps: unknown[], triggers?: unknown[]): Promise<Record<string, string>> {
  const { tokens } = await saveOk(f, { step_params: steps, ...(triggers ? { trigger_params: triggers } : {}) });
  return tokens;
}
async function post(token: string, payload: unknown, headers: Record<string, string> = {}): Promise<{ workflow_run_id: string; resumed?: true }> {
  const d = await deliver(f, `/api/v1/webhooks/${token}`, JSON.stringify(payload), headers);
  assert.equal(d.status, 202, d.text);
  return d.body;
}

describe('delay', () => {
  it('parks the run (waiting, resume_at, no lease) and resumes it once at its time', async () => {
    const tokens = await workflow([{ key: 'pause', type: 'delay', config: { duration: '"1h30m"' } }, create]);
    const before = clock();
    const { workflow_run_id: id } = await post(tokens.hook!, { id: 'delay-1' });
    const parked = await until(
      'the run to park',
      () => row(id),
      (r) => r.status === 'waiting',
    );
    assert.equal(parked.locked_by, null);
    assert.equal(parked.locked_until, null);
    assert.equal(parked.attempt, 1);
    const resumeAt = new Date(parked.resume_at!).getTime();
    assert.ok(resumeAt >= before + 90 * 60_000 && resumeAt <= clock() + 90 * 60_000, String(parked.resume_at));
    assert.equal(new Date(parked.run_at).getTime(), resumeAt);
    const shown = await runOf(id);
    assert.equal(shown.status, 'waiting');
    assert.equal(shown.resume_at, new Date(resumeAt).toISOString());
    assert.deepEqual(
      shown.steps.map((s: { key: string; status: string }) => [s.key, s.status]),
      [['pause', 'waiting']],
    );
    // Before its time nothing happens, and no worker holds it.
    await sleep(200);
    assert.equal((await row(id)).status, 'waiting');
    assert.equal(worker.inFlight(), 0);
    assert.equal(creates('delay-1'), 0);

    offset = resumeAt - Date.now() + 1000;
    const done = await until(
      'the run to finish',
      () => row(id),
      (r) => r.status === 'succeeded',
    );
    assert.equal(done.attempt, 1, 'a wait spends no attempt');
    assert.equal(done.resume_at, null);
    assert.equal(creates('delay-1'), 1);
    assert.deepEqual(done.steps[0]!.output, { until: new Date(resumeAt).toISOString() });
    await sleep(200);
    assert.equal(creates('delay-1'), 1, 'resumed exactly once');
    offset = 0;
  });

  it('refuses a literal duration past the longest wait at save, and a computed one at run time', async () => {
    const tooLong = await f.api.post(`${API}/workflows/save_builder_state`, {
      data: {
        type: 'workflow_builder_state',
        attributes: {
          is_new_version: false,
          organization_id: f.tenant.organizationId,
          wf_params: { name: 'Too long', is_active: true },
          trigger_params: [{ key: 'hook', type: 'webhook', service_account_id: f.tenant.credentialId }],
          step_params: [{ key: 'pause', type: 'delay', config: { duration: '"400d"' } }],
        },
      },
    });
    assert.equal(tooLong.status, 422, tooLong.text);
    assert.equal(tooLong.body.errors[0].source.pointer, '/data/attributes/step_params/0/config/duration');
    const tokens = await workflow([{ key: 'pause', type: 'delay', config: { duration: 'payload.wait' } }]);
    const { workflow_run_id: id } = await post(tokens.hook!, { wait: '400d' });
    const r = await until(
      'the run to fail',
      () => row(id),
      (x) => x.status === 'failed',
    );
    assert.equal(r.outcome, 'failed');
    assert.match(r.error!, /longer than the longest wait, 366 days/);
  });
});

describe('wait_until', () => {
  it('goes on at once for an instant already past, and parks until a later one', async () => {
    const tokens = await workflow([{ key: 'at', type: 'wait_until', config: { at: 'payload.at' } }]);
    const past = await post(tokens.hook!, { at: '2020-01-01T00:00:00Z' });
    assert.equal(
      (
        await until(
          'the past one',
          () => row(past.workflow_run_id),
          (r) => r.status === 'succeeded',
        )
      ).attempt,
      1,
    );
    const at = new Date(Date.now() + 86_400_000).toISOString();
    const later = await post(tokens.hook!, { at });
    const parked = await until(
      'the later one to park',
      () => row(later.workflow_run_id),
      (r) => r.status === 'waiting',
    );
    assert.equal(new Date(parked.resume_at!).toISOString(), at);
    offset = 86_400_000 + 1000;
    await until(
      'the later one to finish',
      () => row(later.workflow_run_id),
      (r) => r.status === 'succeeded',
    );
    offset = 0;
  });
});

describe('1,000 parked runs', () => {
  it('hold no worker slot, no lease and no connection: other runs go on while they wait, and all resume', { timeout: 240_000 }, async () => {
    // The worker's baseline: what its polls and the test's own reads hold of the pool with no run at all.
    const baseline = await connectionsHeld();
    const tokens = await workflow([
      { key: 'pause', type: 'delay', config: { duration: '"10m"' } },
      { key: 'after', type: 'transform', config: { expression: 'payload.n' } },
    ]);
    const ids: string[] = [];
    for (let i = 0; i < 1000; i += 50) {
      const batch = await Promise.all(Array.from({ length: 50 }, (_, j) => post(tokens.hook!, { n: i + j })));
      ids.push(...batch.map((b) => b.workflow_run_id));
    }
    const count = async (status: string) =>
      Number(
        (
          await f.t.deps.db
            .selectFrom('workflow_runs')
            .select((eb) => eb.fn.countAll().as('n'))
            .where('id', 'in', ids)
            .where('status', '=', status as never)
            .executeTakeFirstOrThrow()
        ).n,
      );
    await until(
      'all 1,000 to park',
      () => count('waiting'),
      (n) => n === 1000,
      180_000,
    );
    const held = await f.t.deps.db.selectFrom('workflow_runs').select('id').where('id', 'in', ids).where('locked_by', 'is not', null).execute();
    assert.equal(held.length, 0, 'no parked run holds a lease');
    assert.equal(worker.inFlight(), 0, 'no parked run holds a worker slot');
    // Parked, the 1,000 hold no database connection: the pool (10) is used no more than with no run at all.
    const parked = await connectionsHeld();
    assert.ok(parked.inUse <= Math.max(baseline.inUse, 1), `pool in use ${JSON.stringify(parked)}, baseline ${JSON.stringify(baseline)}`);
    assert.equal(parked.waiting, 0, 'nothing waits for a connection');
    if (parked.backends !== undefined) {
      assert.ok(parked.backends <= Math.max(baseline.backends!, 1), `backends busy ${parked.backends}, baseline ${baseline.backends}`);
      assert.equal(parked.inTransaction, 0, 'no session is left inside a transaction');
    }
    // A worker of 4 slots still runs other work while the 1,000 wait.
    const other = await workflow(
      [{ key: 'echo', type: 'transform', config: { expression: 'payload' } }],
      [{ key: 'other', type: 'webhook', service_account_id: f.tenant.credentialId }],
    );
    const o = await post(other.other!, { hello: 1 });
    await until(
      'the other run',
      () => row(o.workflow_run_id),
      (r) => r.status === 'succeeded',
    );
    offset = 11 * 60_000;
    await until(
      'all 1,000 to resume',
      () => count('succeeded'),
      (n) => n === 1000,
      180_000,
    );
    const attempts = await f.t.deps.db.selectFrom('workflow_runs').select('attempt').where('id', 'in', ids).where('attempt', '<>', 1).execute();
    assert.equal(attempts.length, 0);
    offset = 0;
  });
});

describe('wait_for_delivery', () => {
  const triggers = () => [
    { key: 'created', type: 'webhook', service_account_id: f.tenant.credentialId },
    { key: 'orders', type: 'webhook', service_account_id: f.tenant.credentialId },
  ];
  const steps = (onTimeout?: string) => [
    {
      key: 'paid',
      type: 'wait_for_delivery',
      config: {
        trigger: 'orders',
        match: 'payload.order_id = steps.order.id and payload.type = "paid"',
        timeout: '1h',
        ...(onTimeout ? { on_timeout: onTimeout } : {}),
      },
    },
  ];

  it('is resumed by the one delivery its match takes; the others start their own runs', async () => {
    const { tokens } = await saveOk(f, {
      step_params: [
        { key: 'order', type: 'transform', config: { expression: 'payload' } },
        ...steps(),
        { key: 'after', type: 'transform', config: { expression: 'steps.paid.amount' } },
      ],
      trigger_params: triggers(),
    });
    const waiting = await post(tokens.created!, { id: 'ord_1' });
    await until(
      'the run to park',
      () => row(waiting.workflow_run_id),
      (r) => r.status === 'waiting',
    );
    const waits = await f.t.deps.db.selectFrom('run_waits').selectAll().where('run_id', '=', waiting.workflow_run_id).execute();
    assert.equal(waits.length, 1);
    assert.equal(waits[0]!.trigger_key, 'orders');

    const others = [await post(tokens.orders!, { order_id: 'ord_2', type: 'paid' }), await post(tokens.orders!, { order_id: 'ord_1', type: 'shipped' })];
    const matched = await post(tokens.orders!, { order_id: 'ord_1', type: 'paid', amount: 42 }, { 'idempotency-key': 'pay-ord-1' });
    assert.equal(matched.workflow_run_id, waiting.workflow_run_id);
    assert.equal(matched.resumed, true);
    for (const o of others) assert.notEqual(o.workflow_run_id, waiting.workflow_run_id);
    const done = await until(
      'the resumed run',
      () => row(waiting.workflow_run_id),
      (r) => r.status === 'succeeded',
    );
    assert.deepEqual(done.steps[1]!.output, { order_id: 'ord_1', type: 'paid', amount: 42 });
    assert.equal(done.steps[2]!.output, 42);
    assert.equal(done.attempt, 1);
    // The matching delivery made no run of its own; each non-matching one did (and those wait in turn, for their own order).
    const runs = await f.t.deps.db.selectFrom('workflow_runs').select(['id', 'trigger_key']).where('workflow_id', '=', done.workflow_id).execute();
    assert.equal(runs.length, 3);
    assert.equal((await f.t.deps.db.selectFrom('run_waits').select('run_id').where('run_id', '=', waiting.workflow_run_id).execute()).length, 0);
    // The same delivery again is a duplicate, as any.
    const again = await deliver(f, `/api/v1/webhooks/${tokens.orders}`, JSON.stringify({ order_id: 'ord_1', type: 'paid', amount: 42 }), {
      'idempotency-key': 'pay-ord-1',
    });
    assert.equal(again.body.status, 'duplicate');
  });

  describe("the docs' order-paid-within-an-hour example", () => {
    const doc = fs.readFileSync(new URL('../../docs/workflows.md', import.meta.url), 'utf8');
    const example = () =>
      JSON.parse(/#### wait_for_delivery[\s\S]*?```json\n([\s\S]*?)```/.exec(doc)![1]!.replaceAll('<account id>', f.tenant.credentialId)) as {
        trigger_params: unknown[];
        step_params: unknown[];
      };

    it("resumes with the paid delivery of the same order; another order's does not match", async () => {
      const { tokens } = await saveOk(f, { ...example(), wf_params: { name: 'Order paid (docs)' } });
      const created = await post(tokens.created!, { id: 'docs_ord_1', type: 'created' });
      await until(
        'the run to park',
        () => row(created.workflow_run_id),
        (r) => r.status === 'waiting',
      );
      const other = await post(tokens.orders!, { order_id: 'docs_ord_2', type: 'paid', amount: 7 });
      assert.notEqual(other.workflow_run_id, created.workflow_run_id, "another order's paid delivery starts its own run");
      assert.equal(other.resumed, undefined);
      assert.equal((await row(created.workflow_run_id)).status, 'waiting');
      const paid = await post(tokens.orders!, { order_id: 'docs_ord_1', type: 'paid', amount: 12.5 });
      assert.deepEqual(paid, { status: 'accepted', workflow_run_id: created.workflow_run_id, resumed: true });
      const done = await until(
        'the resumed run',
        () => row(created.workflow_run_id),
        (r) => r.status === 'succeeded' || r.status === 'failed',
      );
      assert.equal(done.status, 'succeeded', JSON.stringify(done.steps));
      assert.deepEqual(
        done.steps.map((st) => [st.key, st.output]),
        [
          ['order', { id: 'docs_ord_1', type: 'created' }],
          ['paid', { order_id: 'docs_ord_1', type: 'paid', amount: 12.5 }],
          ['amount', 12.5],
        ],
      );
    });

    it('fails the run when no paid delivery comes within the hour', async () => {
      const { tokens } = await saveOk(f, { ...example(), wf_params: { name: 'Order paid (docs), timeout' } });
      const created = await post(tokens.created!, { id: 'docs_ord_3', type: 'created' });
      const parked = await until(
        'the run to park',
        () => row(created.workflow_run_id),
        (r) => r.status === 'waiting',
      );
      const waitsFor = new Date(parked.resume_at!).getTime() - new Date(parked.inserted_at).getTime();
      assert.ok(waitsFor >= 3_600_000 && waitsFor < 3_600_000 + 60_000, `an hour: ${waitsFor} ms`);
      offset = new Date(parked.resume_at!).getTime() - Date.now() + 1000;
      const done = await until(
        'the timeout',
        () => row(created.workflow_run_id),
        (r) => r.status === 'succeeded' || r.status === 'failed',
      );
      offset = 0;
      assert.equal(done.status, 'failed');
      assert.match(done.error!, /No delivery on trigger orders matched within 1h/);
      // The paid delivery after the hour resumes nothing.
      const late = await post(tokens.orders!, { order_id: 'docs_ord_3', type: 'paid', amount: 1 });
      assert.notEqual(late.workflow_run_id, created.workflow_run_id);
    });
  });

  for (const onTimeout of ['fail', 'continue'] as const) {
    it(`times out: on_timeout ${onTimeout}`, async () => {
      const { tokens } = await saveOk(f, {
        step_params: [{ key: 'order', type: 'transform', config: { expression: 'payload' } }, ...steps(onTimeout)],
        trigger_params: triggers(),
      });
      const waiting = await post(tokens.created!, { id: `ord_t_${onTimeout}` });
      const parked = await until(
        'the run to park',
        () => row(waiting.workflow_run_id),
        (r) => r.status === 'waiting',
      );
      offset = new Date(parked.resume_at!).getTime() - Date.now() + 1000;
      const done = await until(
        'the timeout',
        () => row(waiting.workflow_run_id),
        (r) => r.status === 'succeeded' || r.status === 'failed',
      );
      offset = 0;
      if (onTimeout === 'fail') {
        assert.equal(done.status, 'failed');
        assert.match(done.error!, /No delivery on trigger orders matched within 1h/);
      } else {
        assert.equal(done.status, 'succeeded');
        assert.equal(done.steps[1]!.output, null);
      }
      // A delivery after the timeout starts its own run.
      const late = await post(tokens.orders!, { order_id: `ord_t_${onTimeout}`, type: 'paid' });
      assert.notEqual(late.workflow_run_id, waiting.workflow_run_id);
    });
  }

  it('must name a webhook trigger of the workflow', async () => {
    const r = await f.api.post(`${API}/workflows/save_builder_state`, {
      data: {
        type: 'workflow_builder_state',
        attributes: {
          is_new_version: false,
          organization_id: f.tenant.organizationId,
          wf_params: { name: 'No such trigger', is_active: true },
          trigger_params: [{ key: 'hook', type: 'webhook', service_account_id: f.tenant.credentialId }],
          step_params: [{ key: 'w', type: 'wait_for_delivery', config: { trigger: 'nope', timeout: '1h' } }],
        },
      },
    });
    assert.equal(r.status, 422, r.text);
    assert.equal(r.body.errors[0].source.pointer, '/data/attributes/step_params/0/config/trigger');
  });
});

describe('cancel', () => {
  it('cancels a waiting run, which never resumes; a finished run is 409, another workspace 404', async () => {
    const tokens = await workflow([{ key: 'pause', type: 'delay', config: { duration: '"10m"' } }, create]);
    const { workflow_run_id: id } = await post(tokens.hook!, { id: 'cancel-1' });
    await until(
      'the run to park',
      () => row(id),
      (r) => r.status === 'waiting',
    );
    const r = await f.api.post(`${API}/workflow_runs/${id}/cancel`, {});
    assert.equal(r.status, 200, r.text);
    assert.equal(r.body.data.attributes.status, 'cancelled');
    assert.equal(r.body.data.attributes.outcome, 'cancelled');
    assert.equal(r.body.data.attributes.resume_at, null);
    assert.deepEqual(
      r.body.data.attributes.steps.map((s: { status: string; reason?: string }) => [s.status, s.reason]),
      [['skipped', 'run cancelled']],
    );
    offset = 11 * 60_000;
    await sleep(300);
    assert.equal((await row(id)).status, 'cancelled');
    assert.equal(creates('cancel-1'), 0, 'a cancelled run never resumes');
    offset = 0;
    const again = await f.api.post(`${API}/workflow_runs/${id}/cancel`, {});
    assert.equal(again.status, 409, again.text);
    assert.match(again.body.errors[0].detail, /The run is cancelled/);
    const missing = await f.api.post(`${API}/workflow_runs/0190a0a0-0000-7000-8000-000000000000/cancel`, {});
    assert.equal(missing.status, 404);
    const list = await f.api.get(`${API}/workflow_runs?filter[status]=cancelled`);
    assert.equal(list.status, 200, list.text);
    assert.ok(list.body.data.some((d: { id: string }) => d.id === id));
  });
});

describe('test runs', () => {
  it('say until when a wait would wait and go on; a wait_for_delivery takes the supplied sample', async () => {
    const { workflow } = await saveOk(f, {
      step_params: [
        { key: 'pause', type: 'delay', config: { duration: '"10m"' } },
        { key: 'paid', type: 'wait_for_delivery', config: { trigger: 'orders', timeout: '1h' } },
        { key: 'amount', type: 'transform', config: { expression: 'steps.paid.amount' } },
      ],
      trigger_params: [{ key: 'orders', type: 'webhook', service_account_id: f.tenant.credentialId }],
    });
    const r = await f.api.post(`${API}/workflows/${workflow.id}/test_run`, {
      data: { type: 'workflow_test_run', attributes: { payload: {}, deliveries: { paid: { payload: { amount: 7 } } } } },
    });
    assert.equal(r.status, 200, r.text);
    const [pause, paid, amount] = r.body.data.attributes.steps;
    assert.equal(pause.status, 'succeeded');
    assert.match(pause.note, /^Would wait until /);
    assert.ok(Date.parse(pause.resume_at) > Date.now() + 9 * 60_000);
    assert.deepEqual(paid.output, { amount: 7 });
    assert.equal(amount.output, 7);
    assert.equal((await f.t.deps.db.selectFrom('workflow_runs').select('id').where('workflow_id', '=', workflow.id).execute()).length, 0);
  });
});

// kill -9 of a separate worker process while its run waits: a new worker process resumes it once (PostgreSQL: PGlite is one process's database).
const ROOT = path.resolve(import.meta.dirname, '../..');
const NODE = path.join(ROOT, 'node_modules/.bin/node');
function spawnWorker(databaseUrl: string): { child: ChildProcess; output: () => string } {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tributary-waits-'));
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!/^(TRIBUTARY_|PORT$|HOST$|DATA_DIR$|DATABASE_URL$|LOG_LEVEL$)/.test(k)) env[k] = v;
  Object.assign(env, { DATA_DIR: dataDir, DATABASE_URL: databaseUrl, LOG_LEVEL: 'info', ALLOW_PRIVATE_EGRESS: 'true', WORKER_POLL_MS: '100' });
  const child = spawn(NODE, ['src/main.ts', 'worker'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.setEncoding('utf8').on('data', (s: string) => (out += s));
  child.stderr!.setEncoding('utf8').on('data', (s: string) => (out += s));
  after(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    fs.rmSync(dataDir, { recursive: true, force: true });
  });
  return { child, output: () => out };
}

describe('kill -9 during a 10 s delay', { skip: !process.env.DATABASE_URL }, () => {
  it('a new worker process resumes the run exactly once', { timeout: 120_000 }, async () => {
    await worker.stop(0);
    const tokens = await workflow([{ key: 'pause', type: 'delay', config: { duration: '"10s"' } }, create]);
    const first = spawnWorker(f.t.config.databaseUrl!);
    await until(
      'a worker to start',
      async () => first.output(),
      (o) => o.includes('"worker started"') || first.child.exitCode !== null,
      90_000,
    );
    const { workflow_run_id: id } = await post(tokens.hook!, { id: 'kill-1' });
    await until(
      'the run to park',
      () => row(id),
      (r) => r.status === 'waiting',
      30_000,
    );
    const exited = new Promise((resolve) => first.child.once('exit', resolve));
    first.child.kill('SIGKILL');
    await exited;
    const second = spawnWorker(f.t.config.databaseUrl!);
    const done = await until(
      'the run to resume',
      () => row(id),
      (r) => r.status === 'succeeded' || r.status === 'failed',
      60_000,
    );
    assert.equal(done.status, 'succeeded', second.output());
    assert.equal(done.attempt, 1);
    await sleep(500);
    assert.equal(creates('kill-1'), 1, 'resumed exactly once');
    second.child.kill('SIGKILL');
    worker = startWorker({ ...f.t.deps, clock });
  });
});
