/**
 * METRICS_PORT: a known load (accepted, duplicate and refused deliveries, runs that finish,
 * facts written by steps and by an import), then a scrape over a real socket whose counts
 * must agree with the database, and whose labels hold no run id, token or raw path. A
 * worker-only process (`tributary worker`) is scraped too, and a scrape whose database does
 * not answer still succeeds, saying so.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { sql } from 'kysely';
import { loadConfig } from '../../src/config.ts';
import { listenMetrics } from '../../src/http/metrics-listener.ts';
import { createMetrics } from '../../src/metrics.ts';
import { start } from '../../src/server.ts';
import { freshPostgresDatabase } from '../helpers/app.ts';
import { API, createModel, deliver, saveOk, startFlow, waitForRun } from '../webhooks/helpers.ts';
import { mockProvider } from '../connectors/mock-provider.ts';

/** A port no one listens on now. */
async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** The samples of a text-format exposition (comments skipped). */
function parseExposition(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    assert.ok(m, `a sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g))
      labels[l[1]!] = l[2]!.replace(/\\(.)/g, (_s, c: string) => (c === 'n' ? '\n' : c));
    out.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return out;
}

async function scrape(url: string): Promise<Sample[]> {
  const res = await fetch(`${url}/metrics`);
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
  return parseExposition(await res.text());
}

/** The sum of a metric's samples whose labels include `match`. */
function total(samples: Sample[], name: string, match: Record<string, string> = {}): number {
  return samples.filter((s) => s.name === name && Object.entries(match).every(([k, v]) => s.labels[k] === v)).reduce((n, s) => n + s.value, 0);
}

describe('metrics after a known load', async () => {
  const port = await freePort();
  const N = 5;
  const M = 2;
  // Windows align to the clock: a day-long one cannot turn over between the sends and the 429.
  const f = await startFlow({
    METRICS_PORT: String(port),
    ALLOW_PRIVATE_EGRESS: 'true',
    WEBHOOK_RATE_LIMIT_MAX: String(N + M),
    WEBHOOK_RATE_LIMIT_WINDOW_SECONDS: '86400',
  });
  const db = f.t.deps.db;
  const provider = await mockProvider();
  after(() => provider.close());
  await createModel(f, 'orders', [
    { name: 'order_id', type: 'string' },
    { name: 'amount', type: 'float', is_required: true },
  ]);
  const saved = await saveOk(f, {
    step_params: [
      { key: 'shape', type: 'transform', config: { expression: '{"id": payload.id, "total": payload.total}' } },
      {
        key: 'store',
        type: 'write_fact',
        config: { data_model_slug: 'orders', mapping: { order_id: 'steps.shape.id', amount: 'steps.shape.total' }, observed_at: 'payload.at' },
      },
    ],
  });
  const token: string = saved.tokens.hook!;
  const runIds: string[] = [];
  const send = (i: number) =>
    deliver(f, `/api/v1/webhooks/${token}`, JSON.stringify({ id: `o-${i}`, total: i, at: '2026-11-01T10:00:00Z' }), { 'idempotency-key': `d-${i}` });
  for (let i = 0; i < N; i++) {
    const d = await send(i);
    assert.equal(d.status, 202, d.text);
    assert.equal(d.body.status, 'accepted');
    runIds.push(d.body.workflow_run_id);
  }
  for (let i = 0; i < M; i++) {
    const d = await send(i);
    assert.equal(d.body.status, 'duplicate', d.text);
  }
  // The trigger's window (N + M) is spent.
  const limited = await send(N);
  assert.equal(limited.status, 429, limited.text);
  const refused = await deliver(f, `/api/v1/webhooks/${token}`, '{}', {}, null);
  assert.equal(refused.status, 401, refused.text);
  const unknown = await deliver(f, `/api/v1/webhooks/tbwh_${'x'.repeat(43)}`, '{}');
  assert.equal(unknown.status, 404, unknown.text);
  const noRoute = await fetch(`${f.t.url}/no/such/${token}`);
  assert.equal(noRoute.status, 404);
  for (const id of runIds) assert.equal((await waitForRun(f, id)).attributes.status, 'succeeded');
  const imported = await fetch(`${f.t.url}/admin/v1/facts/import?${new URLSearchParams({ workspace_id: f.tenant.workspaceId, data_model: 'orders' })}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${f.t.adminToken}`, 'content-type': 'application/x-ndjson' },
    body: ['{"observed_at": "2026-01-01T00:00:00Z", "data": {"order_id": "i-1", "amount": 1}}', '{"observed_at": "2026-01-01T00:00:00Z", "data": {}}', ''].join(
      '\n',
    ),
  });
  // A provider call that fails once (503: the run is retried) and then succeeds.
  const shop = { name: 'Shop', auth_type: 'bearer_token', secret: 'tok-shop-123', config: { base_url: provider.url } };
  const made = await f.api.post(`${API}/external_connectors`, {
    data: { type: 'external_connector', attributes: { ...shop, type: 'http', direction: 'outbound' } },
  });
  assert.equal(made.status, 201, made.text);
  const connectorId: string = made.body.data.id;
  provider.script('/orders/secret-path', { status: 503 }, { status: 200, body: { ok: true } });
  const caller = await saveOk(f, {
    wf_params: { name: 'Caller', is_active: true },
    step_params: [{ key: 'call', type: 'http_request', config: { connector_id: connectorId, method: 'POST', path: '/orders/secret-path', body: 'payload' } }],
  });
  const called = await deliver(f, `/api/v1/webhooks/${caller.tokens.hook!}`, '{"n": 1}');
  assert.equal(called.status, 202, called.text);
  const calledRun = await waitForRun(f, called.body.workflow_run_id);
  assert.equal(calledRun.attributes.status, 'succeeded', JSON.stringify(calledRun.attributes));
  runIds.push(called.body.workflow_run_id);
  const importText = await imported.text();
  assert.equal(imported.status, 200, importText);
  const importedLines = (JSON.parse(importText) as { data: { lines: number } }).data.lines;
  const samples = await scrape(`http://127.0.0.1:${port}`);

  it('counts deliveries by outcome as the runs table has them', async () => {
    const { rows } = await sql<{ n: number }>`select count(*)::int as n from workflow_runs`.execute(db);
    assert.equal(total(samples, 'tributary_webhook_deliveries_total', { outcome: 'accepted' }), rows[0]!.n);
    assert.equal(rows[0]!.n, N + 1);
    assert.equal(total(samples, 'tributary_webhook_deliveries_total', { outcome: 'duplicate' }), M);
    assert.equal(total(samples, 'tributary_webhook_deliveries_total', { outcome: 'unauthorized' }), 1);
    assert.equal(total(samples, 'tributary_webhook_deliveries_total', { outcome: 'not_found' }), 1);
    assert.equal(total(samples, 'tributary_webhook_deliveries_total', { outcome: 'rate_limited' }), 1);
  });

  it('counts finished runs, their durations and steps as the runs table has them', async () => {
    const { rows } = await sql<{
      outcome: string;
      n: number;
    }>`select outcome, count(*)::int as n from workflow_runs where status in ('succeeded', 'failed') group by outcome`.execute(db);
    assert.deepEqual(rows, [{ outcome: 'completed', n: N + 1 }]);
    // By outcome only: two workflows, one series.
    assert.deepEqual(
      samples.filter((x) => x.name === 'tributary_runs_finished_total'),
      [{ name: 'tributary_runs_finished_total', labels: { outcome: 'completed' }, value: N + 1 }],
    );
    assert.equal(total(samples, 'tributary_run_duration_seconds_count', { outcome: 'completed' }), N + 1);
    assert.equal(total(samples, 'tributary_step_attempts_total', { type: 'transform', status: 'succeeded' }), N);
    assert.equal(total(samples, 'tributary_step_attempts_total', { type: 'write_fact', status: 'succeeded' }), N);
    assert.equal(total(samples, 'tributary_step_attempts_total', { type: 'http_request', status: 'failed' }), 1);
    assert.equal(total(samples, 'tributary_step_attempts_total', { type: 'http_request', status: 'succeeded' }), 1);
    assert.equal(total(samples, 'tributary_step_retries_total', { type: 'http_request' }), 1);
    assert.equal(total(samples, 'tributary_step_retries_total'), 1);
  });

  it('counts provider calls by driver and status as the provider got them', () => {
    assert.equal(provider.requests.filter((r) => r.path === '/orders/secret-path').length, 2);
    const call = { driver: 'http' };
    assert.equal(total(samples, 'tributary_provider_calls_total', { ...call, status: '503' }), 1);
    assert.equal(total(samples, 'tributary_provider_calls_total', { ...call, status: '200' }), 1);
    assert.equal(total(samples, 'tributary_provider_call_duration_seconds_count', call), 2);
  });

  it('has no workflow id, connector id or operation in any label: what tenants make never multiplies the series', async () => {
    const { rows } = await sql<{ id: string }>`select id from workflows union all select id from external_connectors`.execute(db);
    assert.ok(rows.length >= 3);
    for (const x of samples) {
      for (const name of ['workflow_id', 'connector_id', 'operation']) assert.equal(x.labels[name], undefined, `${x.name} has a ${name} label`);
      for (const v of Object.values(x.labels)) assert.ok(!rows.some((r) => v.includes(r.id)), `an id in a label of ${x.name}: ${v}`);
    }
  });

  it('counts facts written (by steps and the import) and import lines as the facts table has them', async () => {
    const { rows } = await sql<{ n: number }>`select count(*)::int as n from facts`.execute(db);
    assert.equal(rows[0]!.n, N + 1);
    assert.equal(total(samples, 'tributary_facts_written_total'), rows[0]!.n);
    assert.equal(importedLines, 2);
    assert.equal(total(samples, 'tributary_fact_import_lines_total'), importedLines);
  });

  it('counts HTTP requests by surface, route pattern, method and status, with their latency', () => {
    const hook = { surface: 'webhooks', route: '/api/v1/webhooks/:token', method: 'POST' };
    // The caller's delivery too.
    assert.equal(total(samples, 'tributary_http_requests_total', { ...hook, status: '202' }), N + M + 1);
    assert.equal(total(samples, 'tributary_http_requests_total', { ...hook, status: '429' }), 1);
    assert.equal(total(samples, 'tributary_http_requests_total', { ...hook, status: '401' }), 1);
    assert.equal(total(samples, 'tributary_http_request_duration_seconds_count', hook), N + M + 4);
    assert.equal(total(samples, 'tributary_http_requests_total', { route: 'unmatched', method: 'GET', status: '404' }), 1);
    assert.ok(total(samples, 'tributary_http_requests_total', { surface: 'token', status: '200' }) >= 1);
    assert.equal(total(samples, 'tributary_rate_limit_refusals_total', { surface: 'webhooks' }), 1);
    assert.equal(total(samples, 'tributary_rate_limit_refusals_total'), 1);
  });

  it('shows the queue, the database and the pool, and the process', () => {
    assert.equal(total(samples, 'tributary_database_up'), 1);
    assert.equal(total(samples, 'tributary_queue_depth', { state: 'ready' }), 0);
    assert.equal(total(samples, 'tributary_queue_depth', { state: 'waiting' }), 0);
    assert.equal(total(samples, 'tributary_queue_oldest_age_seconds', { state: 'ready' }), 0);
    assert.ok(samples.some((s) => s.name === 'tributary_database_pool_connections' && s.labels.state === 'in_use'));
    assert.ok(samples.some((s) => s.name === 'tributary_process_cpu_user_seconds_total'));
    assert.ok(samples.some((s) => s.name === 'tributary_nodejs_heap_size_used_bytes'));
  });

  it('has no run id, token or raw path in any label', async () => {
    const { rows } = await sql<{ id: string }>`select id from workflow_runs`.execute(db);
    const values = samples.flatMap((s) => Object.values(s.labels));
    for (const v of values) {
      assert.ok(!rows.some((r) => v.includes(r.id)), `a run id in a label: ${v}`);
      assert.ok(!v.includes(token) && !/tbwh_|Bearer|\/no\/such|secret-path|tok-shop/.test(v), `a token or raw path in a label: ${v}`);
    }
    const routes = new Set(samples.filter((s) => s.labels.route !== undefined).map((s) => s.labels.route));
    for (const r of routes) assert.ok(r === 'unmatched' || r!.startsWith('/'), r);
  });

  it('answers only GET /metrics', async () => {
    assert.equal((await fetch(`http://127.0.0.1:${port}/`)).status, 404);
    assert.equal((await fetch(`http://127.0.0.1:${port}/metrics`, { method: 'POST' })).status, 405);
    assert.equal((await f.api.get(`${API}/workflow_runs`)).status, 200);
  });
});

describe('a worker-only process', () => {
  it('serves its own metrics on its METRICS_PORT', { timeout: 120_000 }, async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tributary-metrics-'));
    const port = await freePort();
    const env: Record<string, string> = { DATA_DIR: dataDir, LOG_LEVEL: 'silent', PORT: '0', METRICS_PORT: String(port) };
    let drop: (() => Promise<void>) | undefined;
    if (process.env.DATABASE_URL) {
      const fresh = await freshPostgresDatabase();
      env.DATABASE_URL = fresh.url;
      drop = fresh.drop;
    }
    const running = await start(loadConfig(env), { http: false, worker: true });
    after(async () => {
      await running.stop();
      await drop?.();
      fs.rmSync(dataDir, { recursive: true, force: true });
    });
    await running.ready;
    assert.equal(running.url, '');
    assert.equal(running.metrics?.url, `http://127.0.0.1:${port}`);
    const samples = await scrape(running.metrics.url);
    assert.equal(total(samples, 'tributary_database_up'), 1);
    assert.equal(total(samples, 'tributary_queue_depth', { state: 'ready' }), 0);
    assert.ok(samples.some((s) => s.name === 'tributary_process_resident_memory_bytes'));
    assert.equal(total(samples, 'tributary_http_requests_total'), 0);
  });
});

describe('a scrape while the database does not answer', () => {
  it('succeeds, leaves the queue out and says the database is down', async () => {
    const metrics = createMetrics({
      queue: () => Promise.reject(new Error('connection refused')),
      pool: () => ({ inUse: 0, waiting: 3 }),
      processMetrics: false,
    });
    const listener = await listenMetrics(metrics, 0, '127.0.0.1');
    after(() => listener.close());
    const samples = await scrape(listener.url);
    assert.equal(total(samples, 'tributary_database_up'), 0);
    assert.ok(!samples.some((s) => s.name.startsWith('tributary_queue_')));
    assert.equal(total(samples, 'tributary_database_pool_connections', { state: 'waiting' }), 3);
  });
});

/** The text a scrape answers, and its series (sample lines). */
async function exposition(metrics: ReturnType<typeof createMetrics>): Promise<{ bytes: number; series: Sample[] }> {
  const text = await metrics.registry.metrics();
  return { bytes: Buffer.byteLength(text), series: parseExposition(text) };
}

const quiet = {
  queue: async () => ({ ready: 0, waiting: 0, parked: 0, oldestReadyAgeSeconds: 0 }),
  pool: () => ({ inUse: 0, waiting: 0 }),
  processMetrics: false,
};
const OUTCOMES = ['completed', 'stopped_at_condition', 'failed', 'dead_letter'];

/** 10,000 workflows' runs, and calls through 1,000 connectors with 10 operations each, every outcome and a few statuses. */
function tenantLoad(metrics: ReturnType<typeof createMetrics>, workflows: number): void {
  for (let i = 0; i < workflows; i++) metrics.runFinished(`wf-${i}`, OUTCOMES[i % OUTCOMES.length]!, i % 100);
  for (let c = 0; c < 1000; c++)
    for (let o = 0; o < 10; o++) metrics.providerCall(`conn-${c}`, `op_${o}`, c % 2 === 0 ? 'http' : 's3', ['200', '429', 'error'][o % 3]!, 0.05);
}

// docs/metrics.md states these bounds.
const DEFAULT_SCRAPE_MAX_BYTES = 32 * 1024;
const OPT_IN_SCRAPE_MAX_BYTES = 2.5 * 1024 * 1024;

describe('labels a tenant cannot multiply', () => {
  it('by default, 10,000 workflows and 10,000 connector operations make the series of one of each', async () => {
    const metrics = createMetrics(quiet);
    tenantLoad(metrics, 10_000);
    const { bytes, series } = await exposition(metrics);
    const runs = series.filter((x) => x.name === 'tributary_runs_finished_total');
    assert.deepEqual(runs.map((x) => x.labels.outcome).sort(), [...OUTCOMES].sort());
    assert.equal(
      runs.reduce((n, x) => n + x.value, 0),
      10_000,
    );
    // 2 drivers x 3 statuses.
    assert.equal(series.filter((x) => x.name === 'tributary_provider_calls_total').length, 6);
    assert.ok(!series.some((x) => 'workflow_id' in x.labels || 'connector_id' in x.labels || 'operation' in x.labels));
    assert.ok(bytes < DEFAULT_SCRAPE_MAX_BYTES, `${bytes} bytes`);
  });

  it('opted in, each metric keeps the latest METRICS_WORKFLOW_LABELS_MAX values and drops the least recently counted', async () => {
    const metrics = createMetrics({ ...quiet, tenantLabels: { max: 500 } });
    tenantLoad(metrics, 1000);
    // wf-3 counted again: it is recent now, and wf-500 (the oldest left) goes instead.
    metrics.runFinished('wf-3', 'completed', 1);
    const { bytes, series } = await exposition(metrics);
    const ids = (name: string, label: string) => new Set(series.filter((x) => x.name === name).map((x) => x.labels[label]));
    const runs = ids('tributary_runs_finished_total', 'workflow_id');
    assert.equal(runs.size, 500);
    assert.ok(runs.has('wf-3') && runs.has('wf-999') && !runs.has('wf-500') && !runs.has('wf-0'));
    const durations = ids('tributary_run_duration_seconds_count', 'workflow_id');
    assert.deepEqual([...durations].sort(), [...runs].sort());
    // A connector and an operation make one value: 500 pairs of the latest connectors.
    const calls = series.filter((x) => x.name === 'tributary_provider_calls_total');
    assert.equal(new Set(calls.map((x) => `${x.labels.connector_id} ${x.labels.operation}`)).size, 500);
    assert.ok(
      calls.every((x) => Number(x.labels.connector_id!.slice(5)) >= 950),
      'the latest 50 connectors x 10 operations',
    );
    assert.ok(bytes < OPT_IN_SCRAPE_MAX_BYTES, `${bytes} bytes`);
  });
});
