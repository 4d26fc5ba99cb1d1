/**
 * Concurrency by key (docs/workflows.md, "Concurrency"): at most `limit` runs of one
 * (workflow, key) execute at once, across two `tributary worker` processes on PostgreSQL;
 * on one process (both engines) a key's runs start in the order they came, a retry keeping
 * its turn, and none spends an attempt while it waits. Keys are served in rotation, so one
 * key's backlog of 50 does not delay another key's run. The save checks the setting, with
 * pointers; a key expression that fails puts the run under the empty key, never refuses it.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'kysely';
import YAML from 'yaml';
import { claimBatch, claimKeyed, FIRST_KEYED, heldByConcurrency, reclaimExpired } from '../../src/runs/queue.sql.ts';
import { keyText } from '../../src/runs/concurrency.ts';
import { API, deliver, save, saveOk, startFlow, type Flow } from '../webhooks/helpers.ts';
import { startWorker } from '../../src/worker/worker.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const NODE = path.join(ROOT, 'node_modules/.bin/node');

/**
 * A provider whose GET /v1/orders/{customer}x{n} answers after `delayMs`: it records, per
 * customer, how many requests it held at once at most, and the order they came in.
 * A path listed in `failOnce` is answered 503 the first time.
 */
function slowProvider(delayMs: number) {
  const inFlight = new Map<string, number>();
  const most = new Map<string, number>();
  const order: string[] = [];
  const failOnce = new Set<string>();
  const server = http.createServer((req, res) => {
    req.resume();
    const id = /\/orders\/([a-z0-9]+)$/.exec(req.url ?? '')?.[1] ?? '';
    const customer = id.split('x')[0]!;
    if (failOnce.delete(id)) {
      res.writeHead(503, { 'content-type': 'application/json' }).end('{"error":"busy"}');
      return;
    }
    order.push(id);
    inFlight.set(customer, (inFlight.get(customer) ?? 0) + 1);
    most.set(customer, Math.max(most.get(customer) ?? 0, inFlight.get(customer)!));
    setTimeout(() => {
      inFlight.set(customer, inFlight.get(customer)! - 1);
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ id, status: 'open' }));
    }, delayMs);
  });
  return {
    most,
    order,
    failOnce,
    listen: () => new Promise<string>((resolve) => server.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`))),
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(resolve));
    },
  };
}

async function connector(f: Flow, baseUrl: string): Promise<string> {
  const c = await f.api.post(`${API}/external_connectors`, {
    data: {
      type: 'external_connector',
      attributes: {
        name: `Orders ${baseUrl}`,
        direction: 'outbound',
        provider_slug: 'tributary-orders',
        secret: `key_${'d'.repeat(40)}`,
        config: { base_url: `${baseUrl}/v1` },
      },
    },
  });
  assert.equal(c.status, 201, c.text);
  return c.body.data.id;
}

const fetchStep = (connectorId: string) => ({
  key: 'fetch',
  type: 'http_request',
  config: { connector_id: connectorId, operation_ref: 'getOrder', params: { order_id: 'payload.customer & "x" & $string(payload.n)' } },
});

/** The docs' example, as docs/workflows.md shows it (its first yaml block of the Concurrency section). */
function docsExample(): { concurrency: { key: string; limit: number } } {
  const docs = fs.readFileSync(path.join(ROOT, 'docs/workflows.md'), 'utf8');
  const section = docs.slice(docs.indexOf('\n## Concurrency'));
  const block = /```yaml\n([\s\S]*?)```/.exec(section)![1]!;
  return YAML.parse(block);
}

const runsOf = (f: Flow, workflowId: string) =>
  f.t.deps.db
    .selectFrom('workflow_runs')
    .select(['id', 'status', 'attempt', 'concurrency_key', 'concurrency_limit', 'payload', 'started_at'])
    .where('workflow_id', '=', workflowId)
    .execute();

async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

describe('saving concurrency', () => {
  it('keeps {key, limit} on the workflow and its version, and refuses a bad one at its pointer', async () => {
    const f = await startFlow({}, { worker: false });
    const steps = [{ key: 'echo', type: 'transform', config: { expression: 'payload' } }];
    const { concurrency } = docsExample();
    assert.deepEqual(concurrency, { key: 'payload.customer_id', limit: 1 });
    const { workflow } = await saveOk(f, { wf_params: { name: 'Orders', concurrency }, step_params: steps });
    assert.deepEqual(workflow.attributes.concurrency, concurrency);
    const versions = await f.api.get(`${API}/workflow_versions?filter[workflow_id]=${workflow.id}`);
    assert.deepEqual(versions.body.data[0].attributes.concurrency, concurrency);

    const bad: Array<[unknown, string]> = [
      [{ key: 'payload.customer_id', limit: 0 }, '/data/attributes/wf_params/concurrency/limit'],
      [{ key: 'payload.customer_id', limit: 1001 }, '/data/attributes/wf_params/concurrency/limit'],
      [{ key: 'payload.customer_id', limit: 1.5 }, '/data/attributes/wf_params/concurrency/limit'],
      [{ key: 'payload.customer_id', limit: '2' }, '/data/attributes/wf_params/concurrency/limit'],
      [{ key: 'payload.(', limit: 2 }, '/data/attributes/wf_params/concurrency/key'],
      [{ limit: 2 }, '/data/attributes/wf_params/concurrency/key'],
      [{ key: 'payload.x', limit: 2, per: 'minute' }, '/data/attributes/wf_params/concurrency/per'],
      ['payload.x', '/data/attributes/wf_params/concurrency'],
    ];
    for (const [c, pointer] of bad) {
      const r = await save(f, { wf_params: { name: 'Orders', concurrency: c }, step_params: steps });
      assert.equal(r.status, 422, `${JSON.stringify(c)}: ${r.text}`);
      assert.equal(r.body.errors[0].source.pointer, pointer, JSON.stringify(c));
    }
    // null, or left out: no limit.
    const none = await saveOk(f, { wf_params: { name: 'Free', concurrency: null }, step_params: steps });
    assert.equal(none.workflow.attributes.concurrency, null);
  });

  it('a key that fails or is missing is the empty key; a long one is a digest', async () => {
    const f = await startFlow({}, { worker: false });
    const { workflow, tokens } = await saveOk(f, {
      wf_params: { name: 'Keys', concurrency: { key: '$number(payload.customer_id) > 0 ? payload.customer_id : payload.customer_id', limit: 3 } },
      step_params: [{ key: 'echo', type: 'transform', config: { expression: 'payload' } }],
    });
    for (const body of [{ customer_id: '7' }, { customer_id: 'not a number' }, {}])
      assert.equal((await deliver(f, `/api/v1/webhooks/${tokens.hook}`, JSON.stringify(body))).status, 202);
    const keys = (await runsOf(f, workflow.id)).map((r) => [r.concurrency_key, r.concurrency_limit]).sort();
    assert.deepEqual(keys, [
      ['', 3],
      ['', 3],
      ['7', 3],
    ]);
    assert.equal(keyText('k'.repeat(201)).length, 'sha256:'.length + 64);
    assert.equal(keyText({ b: 1, a: 2 }), '{"a":2,"b":1}');
    assert.equal(keyText(42), '42');
  });
});

describe('claims by key', () => {
  const lease = () => new Date(Date.now() + 60_000);

  it("serves keys in rotation: a key's backlog of 50 does not delay another key's one run", async () => {
    const f = await startFlow({}, { worker: false });
    const { workflow, tokens } = await saveOk(f, {
      wf_params: { name: 'Busy', concurrency: { key: 'payload.customer', limit: 1 } },
      step_params: [{ key: 'echo', type: 'transform', config: { expression: 'payload' } }],
    });
    for (let n = 1; n <= 50; n++) assert.equal((await deliver(f, `/api/v1/webhooks/${tokens.hook}`, JSON.stringify({ customer: 'busy', n }))).status, 202);
    assert.equal((await deliver(f, `/api/v1/webhooks/${tokens.hook}`, JSON.stringify({ customer: 'quiet', n: 1 }))).status, 202);

    const first = await claimBatch(f.t.deps.db, 'conc-1', 10, new Date(), lease());
    assert.deepEqual(
      first.runs.map((r) => r.payload).sort((a: any, b: any) => a.customer.localeCompare(b.customer)),
      [
        { customer: 'busy', n: 1 },
        { customer: 'quiet', n: 1 },
      ],
    );
    // Busy's first holds its one slot: nothing more of it, however often a worker asks.
    assert.deepEqual((await claimBatch(f.t.deps.db, 'conc-2', 10, new Date(), lease(), undefined, first.keyed)).runs, []);
    const held = await runsOf(f, workflow.id);
    assert.equal(held.filter((r) => r.status === 'running').length, 2);
    assert.ok(
      held.every((r) => r.attempt === (r.status === 'running' ? 1 : 0)),
      'runs held back spend no attempt',
    );
    // What the gauge tributary_runs_held_by_concurrency shows: busy's other 49.
    assert.deepEqual(await heldByConcurrency(f.t.deps.db, new Date()), new Map([[f.tenant.workspaceId, 49]]));

    // Its lease lost, the slot is free again once the lease is reclaimed: the same run, its order kept.
    const busyFirst = first.runs.find((r) => (r.payload as { customer: string }).customer === 'busy')!;
    await sql`update workflow_runs set locked_until = ${new Date(Date.now() - 1000)} where id = ${busyFirst.id}`.execute(f.t.deps.db);
    assert.equal(await reclaimExpired(f.t.deps.db, new Date(), 5), 1);
    const again = await claimKeyed(f.t.deps.db, 'conc-3', 10, new Date(), lease());
    assert.deepEqual(
      again.runs.map((r) => [r.id, r.attempt]),
      [[busyFirst.id, 2]],
    );
  });

  it('rotates over more keys than one claim looks at: every key is served within a few claims', async () => {
    const f = await startFlow({}, { worker: false });
    const { workflow } = await saveOk(f, {
      wf_params: { name: 'Many', concurrency: { key: 'payload.customer', limit: 1 } },
      step_params: [{ key: 'echo', type: 'transform', config: { expression: 'payload' } }],
    });
    // More than the webhook's rate window lets through: inserted as a delivery inserts them, keyed.
    const at = new Date(Date.now() - 60_000);
    await sql`insert into workflow_runs (id, organization_id, workspace_id, workflow_id, workflow_version, trigger_key, payload, max_attempts, run_at, inserted_at, updated_at, concurrency_key, concurrency_limit)
      select gen_random_uuid(), ${f.tenant.organizationId}, ${f.tenant.workspaceId}, ${workflow.id}, 1, 'hook', jsonb_build_object('customer', 'c' || k, 'n', n), 3,
             ${at}, ${at}::timestamptz + (n * 1000 + k) * interval '1 millisecond', ${at}, 'c' || k, 1
      from generate_series(0, 149) as k, generate_series(1, 2) as n`.execute(f.t.deps.db);
    const served = new Set<string>();
    let keyed = FIRST_KEYED;
    for (let i = 0; i < 6 && served.size < 150; i++) {
      const batch = await claimBatch(f.t.deps.db, `conc-many-${i}`, 64, new Date(), lease(), undefined, keyed);
      keyed = batch.keyed;
      for (const r of batch.runs) {
        const p = r.payload as { customer: string; n: number };
        assert.equal(p.n, 1, 'the first of each key, never its second while the first runs');
        assert.ok(!served.has(p.customer));
        served.add(p.customer);
      }
    }
    assert.equal(served.size, 150);
  });

  it('two concurrent claims never exceed a key’s limit', async () => {
    const f = await startFlow({}, { worker: false });
    const { workflow, tokens } = await saveOk(f, {
      wf_params: { name: 'Race', concurrency: { key: 'payload.customer', limit: 2 } },
      step_params: [{ key: 'echo', type: 'transform', config: { expression: 'payload' } }],
    });
    for (let n = 1; n <= 20; n++) assert.equal((await deliver(f, `/api/v1/webhooks/${tokens.hook}`, JSON.stringify({ customer: 'a', n }))).status, 202);
    await Promise.all(Array.from({ length: 6 }, (_, i) => claimKeyed(f.t.deps.db, `race-${i}`, 10, new Date(), lease())));
    const running = (await runsOf(f, workflow.id)).filter((r) => r.status === 'running');
    assert.deepEqual(
      running.map((r) => (r.payload as { n: number }).n).sort((a, b) => a - b),
      [1, 2],
    );
  });
});

describe('one worker process', () => {
  it('limit 1: one customer’s runs one at a time, in order, a retry keeping its turn, no attempt spent waiting', async () => {
    const provider = slowProvider(100);
    const url = await provider.listen();
    after(() => provider.close());
    const f = await startFlow({ ALLOW_PRIVATE_EGRESS: 'true', RUN_MAX_ATTEMPTS: '3', RUN_RETRY_SCHEDULE: '200ms', WORKER_CONCURRENCY: '8' }, { worker: true });
    const id = await connector(f, url);
    const { workflow, tokens } = await saveOk(f, {
      wf_params: { name: 'In order', concurrency: { key: 'payload.customer', limit: 1 } },
      step_params: [fetchStep(id)],
    });
    provider.failOnce.add('ax2');
    for (let n = 1; n <= 5; n++) assert.equal((await deliver(f, `/api/v1/webhooks/${tokens.hook}`, JSON.stringify({ customer: 'a', n }))).status, 202);
    await until('the runs to finish', async () => (await runsOf(f, workflow.id)).every((r) => r.status === 'succeeded'));
    assert.deepEqual(provider.order, ['ax1', 'ax2', 'ax3', 'ax4', 'ax5']);
    assert.equal(provider.most.get('a'), 1);
    const runs = await runsOf(f, workflow.id);
    assert.deepEqual(runs.map((r) => r.attempt).sort(), [1, 1, 1, 1, 2]);
    assert.ok(runs.every((r) => r.concurrency_key === 'a' && r.concurrency_limit === 1));
  });
});

describe('concurrency and waits', () => {
  it('limit 1: a run parked on a delay holds no slot; the next of its key runs meanwhile, and the parked one resumes at its time', async () => {
    const provider = slowProvider(150);
    const url = await provider.listen();
    after(() => provider.close());
    const f = await startFlow({ ALLOW_PRIVATE_EGRESS: 'true', WORKER_POLL_MS: '20', WORKER_CONCURRENCY: '8' }, { worker: false });
    // The worker's clock: the test moves it past A's delay instead of sleeping through it.
    let offset = 0;
    const worker = startWorker({ ...f.t.deps, clock: () => Date.now() + offset });
    after(() => worker.stop(0));
    const id = await connector(f, url);
    const { workflow, tokens } = await saveOk(f, {
      wf_params: { name: 'Key K parks', concurrency: { key: 'payload.customer', limit: 1 } },
      step_params: [
        fetchStep(id),
        { key: 'pause', type: 'delay', config: { duration: 'payload.pause' } },
        {
          ...fetchStep(id),
          key: 'fetch_after',
          config: { ...fetchStep(id).config, params: { order_id: 'payload.customer & "x" & $string(payload.n) & "b"' } },
        },
      ],
    });
    // Never two of K executing: sampled all along, as the provider counts calls held at once.
    let mostRunning = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const { rows } = await sql<{ n: number }>`select count(*)::int as n from workflow_runs
          where workflow_id = ${workflow.id} and concurrency_key = 'k' and status = 'running'`.execute(f.t.deps.db);
        mostRunning = Math.max(mostRunning, rows[0]!.n);
        await sleep(10);
      }
    })();
    const post = async (payload: unknown) => {
      const d = await deliver(f, `/api/v1/webhooks/${tokens.hook}`, JSON.stringify(payload));
      assert.equal(d.status, 202, d.text);
      return d.body.workflow_run_id as string;
    };
    const statusOf = async (runId: string) => (await runsOf(f, workflow.id)).find((r) => r.id === runId)!.status;

    const a = await post({ customer: 'k', n: 1, pause: '10m' });
    await until('A to park', async () => (await statusOf(a)) === 'waiting');
    const b = await post({ customer: 'k', n: 2, pause: 0 });
    await until('B to finish while A waits', async () => (await statusOf(b)) === 'succeeded', 20_000);
    assert.equal(await statusOf(a), 'waiting', 'A still parked');
    assert.deepEqual(provider.order, ['kx1', 'kx2', 'kx2b']);

    offset = 11 * 60_000;
    await until('A to resume and finish', async () => (await statusOf(a)) === 'succeeded', 20_000);
    sampling = false;
    await sampler;
    assert.deepEqual(provider.order, ['kx1', 'kx2', 'kx2b', 'kx1b'], 'A resumed after its delay, without calling its first step again');
    assert.equal(provider.most.get('k'), 1);
    assert.equal(mostRunning, 1, 'never two of K running at once');
    const runs = await runsOf(f, workflow.id);
    assert.deepEqual(
      runs.map((r) => r.attempt),
      [1, 1],
      'neither spent an attempt waiting',
    );
  });
});

function spawnWorker(databaseUrl: string): { child: ChildProcess; output: () => string; exited: Promise<unknown> } {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tributary-conc-'));
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!/^(TRIBUTARY_|PORT$|HOST$|DATA_DIR$|DATABASE_URL$|LOG_LEVEL$)/.test(k)) env[k] = v;
  }
  Object.assign(env, {
    DATA_DIR: dataDir,
    DATABASE_URL: databaseUrl,
    LOG_LEVEL: 'info',
    ALLOW_PRIVATE_EGRESS: 'true',
    WORKER_CONCURRENCY: '8',
    WORKER_POLL_MS: '100',
  });
  const child = spawn(NODE, ['src/main.ts', 'worker'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.setEncoding('utf8').on('data', (s: string) => (out += s));
  child.stderr!.setEncoding('utf8').on('data', (s: string) => (out += s));
  const exited = new Promise((resolve) => child.on('exit', resolve));
  after(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await exited;
    }
    fs.rmSync(dataDir, { recursive: true, force: true });
  });
  return { child, output: () => out, exited };
}

describe('two worker processes', () => {
  it('limit 2 by key: never 3 of one key executing, across both processes', { skip: !process.env.DATABASE_URL, timeout: 240_000 }, async () => {
    const provider = slowProvider(250);
    const url = await provider.listen();
    after(() => provider.close());
    const f = await startFlow({ ALLOW_PRIVATE_EGRESS: 'true' }, { worker: false });
    const id = await connector(f, url);
    const { workflow, tokens } = await saveOk(f, {
      wf_params: { name: 'Two at once', concurrency: { key: 'payload.customer', limit: 2 } },
      step_params: [fetchStep(id)],
    });
    for (let n = 1; n <= 16; n++)
      for (const customer of ['a', 'b']) assert.equal((await deliver(f, `/api/v1/webhooks/${tokens.hook}`, JSON.stringify({ customer, n }))).status, 202);
    const workers = [spawnWorker(f.t.config.databaseUrl!), spawnWorker(f.t.config.databaseUrl!)];
    for (const w of workers) await until('a worker to start', () => w.output().includes('"worker started"') || w.child.exitCode !== null, 90_000);
    for (const w of workers) assert.equal(w.child.exitCode, null, w.output());

    await until('the runs to finish', async () => (await runsOf(f, workflow.id)).every((r) => r.status === 'succeeded'), 120_000);
    assert.equal(provider.order.length, 32);
    assert.equal(provider.most.get('a'), 2, 'two of a key at once, never three');
    assert.equal(provider.most.get('b'), 2);
    assert.ok(
      (await runsOf(f, workflow.id)).every((r) => r.attempt === 1),
      'runs held back spend no attempt',
    );
    for (const w of workers) w.child.kill('SIGTERM');
    await Promise.all(workers.map((w) => w.exited));
  });
});
