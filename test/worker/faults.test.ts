/**
 * Faults under load (PostgreSQL): a serving process killed with SIGKILL mid-stream loses
 * no acknowledged delivery and does no run twice; the database going away answers only
 * 202 and 503, and the service recovers by itself.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import pg from 'pg';
import { freshPostgresDatabase } from '../helpers/app.ts';
import { freePort, ROOT } from '../helpers/cli.ts';
import { tcpProxy } from '../helpers/tcp-proxy.ts';
import { sourceKey } from '../../src/worker/execute.ts';
import { mockProvider } from '../connectors/mock-provider.ts';

const POSTGRES = Boolean(process.env.DATABASE_URL);
const skip = !POSTGRES && 'needs PostgreSQL';

interface Server {
  child: ChildProcess;
  url: string;
  output: () => string;
}

async function serve(env: Record<string, string>, port: number): Promise<Server> {
  let out = '';
  const child = spawn(process.execPath, ['src/main.ts', 'serve'], {
    cwd: ROOT,
    env: { ...process.env, PORT: String(port), LOG_LEVEL: 'warn', LOG_FORMAT: 'json', ...env },
  });
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 20_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`server exited: ${out}`);
    try {
      if ((await fetch(`${url}/readyz`)).status === 200) return { child, url, output: () => out };
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`server did not become ready: ${out}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function stopped(child: ChildProcess, signal: NodeJS.Signals): Promise<void> {
  // Killed by a signal, a child has a signalCode and no exitCode.
  if (child.exitCode !== null || child.signalCode !== null) return;
  const done = new Promise((resolve) => child.once('exit', resolve));
  child.kill(signal);
  await done;
}

type Api = (p: string, body: unknown) => Promise<any>;

/** A tenant (the bootstrap account), a data model and a workflow with one webhook trigger (its steps `steps` makes, when given), through the API. */
async function setUp(url: string, dataDir: string, steps?: (api: Api) => Promise<unknown[]>): Promise<{ bearer: string; hook: string }> {
  const boot = JSON.parse(fs.readFileSync(path.join(dataDir, 'bootstrap.json'), 'utf8'));
  const tok = await fetch(`${url}/api/v1/oauth/token`, {
    method: 'POST',
    body: new URLSearchParams({ grant_type: 'client_credentials', client_id: boot.client_id, client_secret: boot.client_secret }),
  });
  const bearer = ((await tok.json()) as { access_token: string }).access_token;
  const api = async (p: string, body: unknown) => {
    const r = await fetch(`${url}/api/json/v1${p}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/vnd.api+json', accept: 'application/vnd.api+json' },
      body: JSON.stringify(body),
    });
    const json = (await r.json()) as any;
    assert.equal(r.status, 201, JSON.stringify(json));
    return json;
  };
  const model = await api('/data_models', { data: { type: 'data_model', attributes: { name: 'Events', slug: 'events' } } });
  await api('/data_model_fields', {
    data: { type: 'data_model_field', attributes: { data_model_id: model.data.id, name: 'event_id', type: 'string', is_primary_key: true } },
  });
  const saved = await api('/workflows/save_builder_state', {
    data: {
      type: 'workflow_builder_state',
      attributes: {
        is_new_version: false,
        organization_id: boot.organization_id,
        wf_params: { name: 'Events' },
        step_params: steps
          ? await steps(api)
          : [
              { key: 'shape', type: 'transform', config: { expression: '{"event_id": payload.id}' } },
              { key: 'store', type: 'write_fact', config: { data_model_slug: 'events', data: 'steps.shape' } },
            ],
        trigger_params: [{ key: 'hook', type: 'webhook', service_account_id: boot.credential_id }],
      },
    },
  });
  return { bearer, hook: `/api/v1/webhooks/${saved.meta.trigger_tokens.hook}` };
}

const post = (url: string, hook: string, bearer: string, id: string) =>
  fetch(`${url}${hook}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json', 'idempotency-key': id },
    body: JSON.stringify({ id }),
  });

async function waitAllFinished(client: pg.Client, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = await client.query(`select count(*)::int as n from workflow_runs where status not in ('succeeded', 'failed')`);
    if (r.rows[0].n === 0) return;
    if (Date.now() > deadline) assert.fail(`${r.rows[0].n} runs still unfinished`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe('faults', { skip }, () => {
  it('kill -9 of serve mid-stream: every 202 has its run after restart, each run done once', async () => {
    const db = await freshPostgresDatabase({ empty: true });
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tributary-kill-'));
    const env = {
      DATABASE_URL: db.url,
      DATA_DIR: dataDir,
      TRIBUTARY_ADMIN_TOKEN: `tbadm_${randomBytes(32).toString('base64url')}`,
      WORKER_LEASE_SECONDS: '2',
      WEBHOOK_RATE_LIMIT_MAX: '1000000',
    };
    const port = await freePort();
    let server = await serve(env, port);
    const client = new pg.Client({ connectionString: db.url });
    try {
      const { bearer, hook } = await setUp(server.url, dataDir);
      const accepted = new Map<string, string>();
      let sent = 0;
      let killed = false;
      const sender = async () => {
        while (!killed || sent < 40) {
          const id = `evt-${sent++}`;
          try {
            const r = await post(server.url, hook, bearer, id);
            const body = (await r.json()) as any;
            if (r.status === 202 && body.status === 'accepted') accepted.set(id, body.workflow_run_id);
          } catch {
            // the connection died with the server: not acknowledged
          }
          if (killed) break;
        }
      };
      const senders = Array.from({ length: 8 }, sender);
      // Killed once some deliveries are acknowledged (however slow the machine), while more are in flight.
      for (const deadline = Date.now() + 20_000; accepted.size < 20 && Date.now() < deadline;) await new Promise((resolve) => setTimeout(resolve, 20));
      await stopped(server.child, 'SIGKILL');
      killed = true;
      await Promise.all(senders);
      assert.ok(accepted.size > 10, `only ${accepted.size} deliveries were accepted before the kill`);

      server = await serve(env, port);
      await client.connect();
      await waitAllFinished(client, 30_000);
      const runs = await client.query(`select id, status, attempt, workflow_version, source_identity from workflow_runs`);
      const ids = new Set(runs.rows.map((r) => r.id));
      for (const [delivery, runId] of accepted) assert.ok(ids.has(runId), `delivery ${delivery} got 202 but has no run`);
      for (const r of runs.rows) assert.equal(r.status, 'succeeded', JSON.stringify(r));
      // Each run stored its one fact exactly once, even a run whose first attempt died with the server.
      const facts = await client.query(`select source_key, count(*)::int as n from facts group by source_key`);
      assert.equal(facts.rows.length, runs.rows.length);
      for (const f of facts.rows) assert.equal(f.n, 1);
      assert.deepEqual(new Set(facts.rows.map((f) => f.source_key)), new Set(runs.rows.map((r) => sourceKey(r, 'store', 0))));
    } finally {
      await stopped(server.child, 'SIGTERM');
      await client.end().catch(() => undefined);
      await db.drop();
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it("kill -9 after step 1's http_request succeeded: the restarted service resumes the run and does not call step 1's provider again", async () => {
    const db = await freshPostgresDatabase({ empty: true });
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tributary-kill-durable-'));
    const mock = await mockProvider();
    mock.script('/v1/orders', { status: 201, body: { id: 'ord_abcdefgh', status: 'open' } });
    // Step 2's provider holds its first request, so the process dies between the steps; later ones answer at once.
    let held = 0;
    const slow = http.createServer((req, res) => {
      req.resume();
      if (held++ > 0) res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
    });
    await new Promise<void>((resolve) => slow.listen(0, '127.0.0.1', resolve));
    const env = {
      DATABASE_URL: db.url,
      DATA_DIR: dataDir,
      TRIBUTARY_ADMIN_TOKEN: `tbadm_${randomBytes(32).toString('base64url')}`,
      WORKER_LEASE_SECONDS: '2',
      ALLOW_PRIVATE_EGRESS: 'true',
    };
    const port = await freePort();
    let server = await serve(env, port);
    const client = new pg.Client({ connectionString: db.url });
    try {
      const connector = async (name: string, baseUrl: string) =>
        (
          await api('/external_connectors', {
            data: {
              type: 'external_connector',
              attributes: { name, direction: 'outbound', provider_slug: 'tributary-orders', secret: `key_${'k'.repeat(40)}`, config: { base_url: baseUrl } },
            },
          })
        ).data.id as string;
      let api!: Api;
      const { bearer, hook } = await setUp(server.url, dataDir, async (a) => {
        api = a;
        const orders = await connector('Orders', `${mock.url}/v1`);
        const held = await connector('Held', `http://127.0.0.1:${(slow.address() as AddressInfo).port}`);
        return [
          {
            key: 'create',
            type: 'http_request',
            config: { connector_id: orders, operation_ref: 'createOrder', body: '{"customer_id": payload.id, "items": []}' },
          },
          { key: 'wait', type: 'http_request', config: { connector_id: held, operation_ref: 'getHealth' } },
          { key: 'shape', type: 'transform', config: { expression: 'steps.create.body.id' } },
        ];
      });
      const r = await post(server.url, hook, bearer, 'cus_1');
      assert.equal(r.status, 202);
      const runId = ((await r.json()) as { workflow_run_id: string }).workflow_run_id;
      await client.connect();
      // Step 1 succeeded and is recorded; step 2 is held.
      for (const deadline = Date.now() + 20_000; ;) {
        const c = await client.query(`select checkpoint from workflow_runs where id = $1`, [runId]);
        if (c.rows[0]?.checkpoint?.steps?.length === 1 && held > 0) break;
        if (Date.now() > deadline) assert.fail(`no checkpoint: ${JSON.stringify(c.rows)} ${server.output()}`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      await stopped(server.child, 'SIGKILL');
      server = await serve(env, port);
      await waitAllFinished(client, 30_000);
      const run = (await client.query(`select status, outcome, attempt, steps from workflow_runs where id = $1`, [runId])).rows[0];
      assert.equal(run.status, 'succeeded', JSON.stringify(run));
      assert.equal(run.attempt, 2);
      assert.equal(mock.requests.filter((q) => q.method === 'POST' && q.path === '/v1/orders').length, 1, "step 1's provider was called once");
      assert.equal(held, 2, "step 2's provider was called again");
      assert.deepEqual(
        run.steps.map((s: any) => [s.key, s.status, s.attempt]),
        [
          ['create', 'succeeded', 1],
          ['wait', 'succeeded', 2],
          ['shape', 'succeeded', 2],
        ],
      );
      assert.equal(run.steps[2].output, 'ord_abcdefgh', "step 3 read step 1's output from the checkpoint");
    } finally {
      await stopped(server.child, 'SIGTERM');
      await client.end().catch(() => undefined);
      slow.closeAllConnections();
      await new Promise((resolve) => slow.close(resolve));
      await mock.close();
      await db.drop();
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('the database gone and back under load: only 202 and 503, then recovery without a restart', async () => {
    const db = await freshPostgresDatabase({ empty: true });
    const u = new URL(db.url);
    const proxy = await tcpProxy({ host: u.hostname, port: Number(u.port || 5432) });
    u.hostname = '127.0.0.1';
    u.port = String(proxy.port);
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tributary-outage-'));
    const env = {
      DATABASE_URL: u.toString(),
      DATA_DIR: dataDir,
      TRIBUTARY_ADMIN_TOKEN: `tbadm_${randomBytes(32).toString('base64url')}`,
      WEBHOOK_RATE_LIMIT_MAX: '1000000',
      DATABASE_CONNECT_TIMEOUT_MS: '1000',
      WORKER_LEASE_SECONDS: '5',
      // Runs the outage failed come back within the test, not at the default schedule's minute.
      RUN_RETRY_SCHEDULE: '500ms',
    };
    const server = await serve(env, await freePort());
    const client = new pg.Client({ connectionString: db.url });
    try {
      const { bearer, hook } = await setUp(server.url, dataDir);
      const statuses = new Map<number, number>();
      const accepted: string[] = [];
      let n = 0;
      let running = true;
      const sender = async () => {
        while (running) {
          const r = await post(server.url, hook, bearer, `o-${n++}`);
          statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
          const body = (await r.json()) as any;
          if (r.status === 202 && body.status === 'accepted') accepted.push(body.workflow_run_id);
          if (r.status === 503) {
            assert.equal(body.error, 'Processing temporarily unavailable');
            assert.match(r.headers.get('retry-after') ?? '', /^\d+$/);
          }
        }
      };
      const senders = Array.from({ length: 6 }, sender);
      await new Promise((resolve) => setTimeout(resolve, 300));
      await proxy.refuse(); // stopped
      await new Promise((resolve) => setTimeout(resolve, 1500));
      await proxy.listenAgain(); // started again
      await new Promise((resolve) => setTimeout(resolve, 2500));
      running = false;
      await Promise.all(senders);
      assert.deepEqual(
        [...statuses.keys()].filter((s) => s !== 202 && s !== 503),
        [],
        JSON.stringify([...statuses]),
      );
      assert.ok((statuses.get(503) ?? 0) > 0, 'the outage was seen');
      // Recovered: a delivery now is accepted and its run finishes.
      const after = await post(server.url, hook, bearer, 'after-outage');
      assert.equal(after.status, 202);
      await client.connect();
      await waitAllFinished(client, 30_000);
      const runs = await client.query(`select id from workflow_runs where status = 'succeeded'`);
      const ids = new Set(runs.rows.map((r) => r.id));
      for (const id of accepted) assert.ok(ids.has(id), `run ${id} was accepted but did not succeed`);
    } finally {
      await stopped(server.child, 'SIGTERM');
      await client.end().catch(() => undefined);
      await proxy.close();
      await db.drop();
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
