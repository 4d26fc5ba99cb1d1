/**
 * A graceful stop fails no run: `tributary serve` as a real process, in a process group of
 * its own, is stopped under load again and again, by a SIGTERM to the process alone and to
 * its whole group (as systemd's KillMode=control-group does), and restarted on the same
 * database. Some steps take long enough that they are inside the expression pool when the
 * signal comes, and some outlast the grace period (their runs are released). Every accepted
 * delivery's run then succeeds, once.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freshPostgresDatabase } from '../helpers/app.ts';
import { freePort } from '../helpers/cli.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const NODE = path.join(ROOT, 'node_modules/.bin/node');
const ROUNDS: Array<'process' | 'group'> = ['group', 'process', 'group', 'process'];
/** Deliveries accepted in a round before its stop. */
const BEFORE_STOP = 12;

const cleanups: Array<() => Promise<void> | void> = [];
after(async () => {
  for (const c of cleanups.reverse()) await c();
});

interface Server {
  child: ChildProcess;
  exited: Promise<void>;
  output: () => string;
}

async function serve(env: NodeJS.ProcessEnv, base: string): Promise<Server> {
  // A process group of its own, so that a signal to the group reaches it and its children only.
  const child = spawn(NODE, ['src/main.ts', 'serve'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let out = '';
  child.stdout!.setEncoding('utf8').on('data', (s: string) => (out = (out + s).slice(-20_000)));
  child.stderr!.setEncoding('utf8').on('data', (s: string) => (out = (out + s).slice(-20_000)));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  cleanups.push(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      process.kill(-child.pid!, 'SIGKILL');
      await exited;
    }
  });
  const deadline = Date.now() + 90_000;
  for (;;) {
    if (child.exitCode !== null) assert.fail(`serve exited with ${child.exitCode}: ${out}`);
    try {
      if ((await fetch(`${base}/readyz`)).status === 200) return { child, exited, output: () => out };
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) assert.fail(`serve did not become ready: ${out}`);
    await sleep(100);
  }
}

async function setUp(base: string, dataDir: string): Promise<{ bearer: () => Promise<string>; hook: string }> {
  const boot = JSON.parse(fs.readFileSync(path.join(dataDir, 'bootstrap.json'), 'utf8'));
  // A token per server: the exchange is the same account each time.
  const bearer = async () => {
    const tok = await fetch(`${base}/api/v1/oauth/token`, {
      method: 'POST',
      body: new URLSearchParams({ grant_type: 'client_credentials', client_id: boot.client_id, client_secret: boot.client_secret }),
    });
    return ((await tok.json()) as { access_token: string }).access_token;
  };
  const token = await bearer();
  const api = async (p: string, body: unknown) => {
    const r = await fetch(`${base}/api/json/v1${p}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/vnd.api+json', accept: 'application/vnd.api+json' },
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
        step_params: [
          // Work inside the pool, of a length the delivery says.
          { key: 'slow', type: 'transform', config: { expression: '$count([1..payload.n].($string($)))' } },
          { key: 'shape', type: 'transform', config: { expression: '{"event_id": payload.id & ":" & $string(steps.slow)}' } },
          { key: 'store', type: 'write_fact', config: { data_model_slug: 'events', data: 'steps.shape' } },
        ],
        trigger_params: [{ key: 'hook', type: 'webhook', service_account_id: boot.credential_id }],
      },
    },
  });
  return { bearer, hook: `/api/v1/webhooks/${saved.meta.trigger_tokens.hook}` };
}

async function listRuns(base: string, token: string): Promise<any[]> {
  const r = await fetch(`${base}/api/json/v1/workflow_runs?page[limit]=250`, {
    headers: { authorization: `Bearer ${token}`, accept: 'application/vnd.api+json' },
  });
  const body = (await r.json()) as any;
  assert.equal(r.status, 200, JSON.stringify(body));
  return body.data;
}

test('SIGTERM under load, to the process or its whole group, fails no run', { timeout: 300_000 }, async () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tributary-stop-'));
  cleanups.push(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!/^(TRIBUTARY_|PORT$|HOST$|DATA_DIR$|DATABASE_URL$|REDIS_URL$|LOG_LEVEL$|SHUTDOWN_GRACE_MS$|RUN_|EXPRESSION_|WORKER_)/.test(k)) env[k] = v;
  }
  Object.assign(env, {
    PORT: String(port),
    HOST: '127.0.0.1',
    DATA_DIR: dataDir,
    LOG_LEVEL: 'warn',
    LOG_FORMAT: 'json',
    TRIBUTARY_ADMIN_TOKEN: `tbadm_${randomBytes(32).toString('base64url')}`,
    WEBHOOK_RATE_LIMIT_MAX: '1000000',
    // Short, so that the longest steps outlast it and their runs are released.
    SHUTDOWN_GRACE_MS: '1500',
    // A budget no step here comes near, however loaded the machine: a failure is the stop's.
    EXPRESSION_TIMEOUT_MS: '30000',
    RUN_RETRY_SCHEDULE: '200ms',
  });
  if (process.env.DATABASE_URL) {
    const fresh = await freshPostgresDatabase({ empty: true });
    cleanups.push(fresh.drop);
    env.DATABASE_URL = fresh.url;
  }
  if (process.env.REDIS_URL) env.REDIS_URL = process.env.REDIS_URL;

  let server = await serve(env, base);
  const { bearer, hook } = await setUp(base, dataDir);
  const accepted = new Map<string, string>();
  let sent = 0;
  for (const how of ROUNDS) {
    const token = await bearer();
    let stopping = false;
    let acceptedThisRound = 0;
    const sender = async () => {
      while (!stopping) {
        const id = `evt-${sent++}`;
        // One in four holds its child for a good while: inside the pool at the signal, some past the grace.
        const n = sent % 4 === 0 ? 40_000 : 2_000;
        try {
          const r = await fetch(`${base}${hook}`, {
            method: 'POST',
            headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'idempotency-key': id },
            body: JSON.stringify({ id, n }),
          });
          const body = (await r.json()) as any;
          if (r.status === 202 && body.status === 'accepted') {
            accepted.set(id, body.workflow_run_id);
            acceptedThisRound++;
          } else if (r.status !== 503) assert.fail(`delivery ${id}: ${r.status} ${JSON.stringify(body)}`);
        } catch (err) {
          if (err instanceof assert.AssertionError) throw err;
          // The server went away with the request: not acknowledged.
          await sleep(20);
        }
      }
    };
    const senders = Array.from({ length: 4 }, sender);
    for (const deadline = Date.now() + 60_000; acceptedThisRound < BEFORE_STOP && Date.now() < deadline;) await sleep(20);
    assert.ok(acceptedThisRound >= BEFORE_STOP, `only ${acceptedThisRound} deliveries accepted in a round: ${server.output()}`);
    // Runs are in flight now (the worker claims at once); some steps are inside the pool.
    process.kill(how === 'group' ? -server.child.pid! : server.child.pid!, 'SIGTERM');
    const stoppedIn = await Promise.race([server.exited.then(() => true), sleep(60_000).then(() => false)]);
    stopping = true;
    await Promise.all(senders);
    assert.ok(stoppedIn, `serve did not stop after a SIGTERM to its ${how}: ${server.output()}`);
    assert.equal(server.child.exitCode, 0, `serve exited with ${server.child.exitCode ?? server.child.signalCode}: ${server.output()}`);
    server = await serve(env, base);
  }

  // The last start finishes every run the stops left.
  const token = await bearer();
  let runs: any[];
  for (const deadline = Date.now() + 120_000; ;) {
    runs = await listRuns(base, token);
    if (runs.every((r) => r.attributes.status === 'succeeded' || r.attributes.status === 'failed')) break;
    if (Date.now() > deadline)
      assert.fail(
        `runs still unfinished: ${JSON.stringify(runs.filter((r) => !['succeeded', 'failed'].includes(r.attributes.status)).map((r) => r.attributes))}`,
      );
    await sleep(200);
  }
  assert.ok(runs.length < 250, 'every run fits one page');
  const byId = new Map(runs.map((r) => [r.id, r]));
  const failed = runs.filter((r) => r.attributes.status !== 'succeeded').map((r) => ({ id: r.id, outcome: r.attributes.outcome, error: r.attributes.error }));
  assert.deepEqual(failed, [], 'no run failed');
  for (const [delivery, runId] of accepted) assert.ok(byId.has(runId), `delivery ${delivery} got 202 but has no run`);
  // One run per delivery, and each delivery's fact stored once, however many attempts it
  // took. A released attempt goes on until its process exits, so it may have stored the
  // fact: the next attempt then finds it by its source key (a duplicate, nothing written).
  const deliveries = runs.map((r) => r.attributes.delivery_id);
  assert.equal(new Set(deliveries).size, runs.length, 'one run per delivery');
  for (const r of runs) {
    const store = r.attributes.steps.find((s: { key: string }) => s.key === 'store');
    assert.equal(store.output.written + store.output.duplicates, 1, JSON.stringify(r.attributes));
  }
  const facts = await fetch(`${base}/api/graphql`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ query: '{ factQuery(dataModelSlug: "events", mode: "timeline", limit: 1) { count } }' }),
  });
  const factsBody = (await facts.json()) as any;
  assert.equal(factsBody.data?.factQuery?.count, runs.length, `one fact per run, none twice: ${JSON.stringify(factsBody)}`);
  assert.ok(accepted.size >= ROUNDS.length * BEFORE_STOP);
  process.kill(server.child.pid!, 'SIGTERM');
  await server.exited;
});
