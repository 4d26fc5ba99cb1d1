/**
 * Traces (docs/tracing.md): an OTLP/HTTP receiver on loopback takes the spans a serve with
 * its worker sends, and they must form one trace from a delivery (under the sender's
 * traceparent) to its run, each step and the provider call, whose traceparent the provider
 * got; the run's resource shows the trace id. Retries, replays and malformed traceparents,
 * a worker in another process (PostgreSQL), tracing off (no trace id, no traceparent sent,
 * no module of OpenTelemetry loaded), and a collector that refuses.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { after, describe, it } from 'node:test';
import type { Logger } from 'pino';
import { capturingLogger, jsonApi, seedTenant, startApp, tokenFor, type TestApp } from '../helpers/app.ts';
import { API, deliver, saveOk, waitForRun, type Flow } from '../webhooks/helpers.ts';
import { mockProvider, type MockProvider } from '../connectors/mock-provider.ts';
import { freePort, ROOT } from '../helpers/cli.ts';
import { quietExporter } from '../../src/tracing-otel.ts';
import { startSchedules } from '../../src/worker/schedules.ts';
import { ERROR, KIND, otlpReceiver, type Received } from '../helpers/otlp-receiver.ts';

const NODE = path.join(ROOT, 'node_modules/.bin/node');

/** A serve with its worker and a tenant, closed by the test (closing sends the last spans) or after the file. */
async function flowWith(env: Record<string, string>, opts: { worker?: boolean; log?: Logger } = {}): Promise<Flow & { close(): Promise<void> }> {
  const t: TestApp = await startApp(
    { RUN_RETRY_SCHEDULE: '20ms', ALLOW_PRIVATE_EGRESS: 'true', ...env },
    { worker: opts.worker ?? true, ...(opts.log ? { log: opts.log } : {}) },
  );
  let closed: Promise<void> | undefined;
  const close = () => (closed ??= t.close());
  after(close);
  const tenant = await seedTenant(t.deps);
  const bearer = await tokenFor(t, tenant);
  return { t, tenant, api: jsonApi(t, bearer), bearer, close };
}

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const SENDER_SPAN = '00f067aa0ba902b7';
const CONNECTOR_SECRET = 'tok-shop-secret-1234567890';
const QUERY_SECRET = 'q-secret-5678';
const PAYLOAD_SECRET = 'payload-value-9012';

async function shopConnector(f: Flow, provider: MockProvider): Promise<string> {
  const made = await f.api.post(`${API}/external_connectors`, {
    data: {
      type: 'external_connector',
      attributes: {
        name: 'Shop',
        auth_type: 'bearer_token',
        secret: CONNECTOR_SECRET,
        type: 'http',
        direction: 'outbound',
        config: { base_url: provider.url },
      },
    },
  });
  assert.equal(made.status, 201, made.text);
  return made.body.data.id;
}

/** A transform, then a POST to the provider with a key in its query. */
const orderSteps = (connectorId: string, path = '/orders/{id}') => [
  { key: 'shape', type: 'transform', config: { expression: '{"id": payload.id, "note": payload.note}' } },
  {
    key: 'call',
    type: 'http_request',
    config: { connector_id: connectorId, method: 'POST', path, params: { id: 'steps.shape.id' }, query: { key: `"${QUERY_SECRET}"` }, body: 'steps.shape' },
  },
];

const one = (spans: Received[], what: string, test: (s: Received) => boolean): Received => {
  const found = spans.filter(test);
  assert.equal(found.length, 1, `one ${what}, got ${found.length}: ${JSON.stringify(spans.map((s) => [s.name, s.traceId, s.parentSpanId]))}`);
  return found[0]!;
};

describe('one trace from a delivery through its run to the provider call', async () => {
  const receiver = await otlpReceiver();
  after(() => receiver.close());
  const provider = await mockProvider();
  after(() => provider.close());
  const f = await flowWith({
    OTEL_EXPORTER_OTLP_ENDPOINT: `${receiver.url}/`,
    OTEL_SERVICE_NAME: 'tributary-test',
    OTEL_EXPORTER_OTLP_HEADERS: 'x-collector-key=k%3D1',
  });
  assert.equal(f.t.deps.tracing.enabled, true);
  const connectorId = await shopConnector(f, provider);
  const saved = await saveOk(f, { step_params: orderSteps(connectorId) });
  const token = saved.tokens.hook!;

  const traceparent = `00-${TRACE_ID}-${SENDER_SPAN}-01`;
  const d = await deliver(f, `/api/v1/webhooks/${token}`, JSON.stringify({ id: 'o-1', note: PAYLOAD_SECRET }), {
    traceparent,
    tracestate: 'vendor=abc',
    'idempotency-key': 'd-1',
  });
  assert.equal(d.status, 202, d.text);
  const runId: string = d.body.workflow_run_id;
  const run = await waitForRun(f, runId);
  assert.equal(run.attributes.status, 'succeeded', JSON.stringify(run.attributes));
  const call = provider.requests.find((r) => r.path.startsWith('/orders/o-1'));
  assert.ok(call, 'the provider was called');

  // A provider that fails once: two attempts in one trace, which the delivery started (no traceparent came).
  provider.script('/flaky', { status: 503 }, { status: 200, body: { ok: true } });
  const flaky = await saveOk(f, {
    wf_params: { name: 'Flaky', is_active: true },
    step_params: [{ key: 'call', type: 'http_request', config: { connector_id: connectorId, method: 'GET', path: '/flaky' } }],
  });
  const retried = await deliver(f, `/api/v1/webhooks/${flaky.tokens.hook!}`, '{}');
  assert.equal(retried.status, 202, retried.text);
  const retriedRun = await waitForRun(f, retried.body.workflow_run_id);
  assert.equal(retriedRun.attributes.status, 'succeeded');
  assert.equal(retriedRun.attributes.attempt, 2);

  // A malformed traceparent is ignored: the delivery starts a trace of its own.
  const malformed = await deliver(f, `/api/v1/webhooks/${token}`, JSON.stringify({ id: 'o-2' }), {
    traceparent: `00-${'0'.repeat(32)}-${SENDER_SPAN}-01`,
    'idempotency-key': 'd-2',
  });
  assert.equal(malformed.status, 202, malformed.text);
  const malformedRun = await waitForRun(f, malformed.body.workflow_run_id);

  // A replay: a new trace from the replay request, linked to the original's.
  const replay = await f.api.post(`${API}/workflow_runs/${runId}/replay`, undefined);
  assert.equal(replay.status, 201, replay.text);
  const replayRun = await waitForRun(f, replay.body.data.id);
  assert.equal(replayRun.attributes.status, 'succeeded');

  // A test run under the request's traceparent.
  const TEST_TRACE = 'a3ce929d0e0e47364bf92f3577b34da6';
  const tested = await f.api.post(
    `${API}/workflows/${saved.workflow.id}/test_run`,
    { data: { type: 'workflow_test_run', attributes: { payload: { id: 'o-3' }, call: 'none' } } },
    { traceparent: `00-${TEST_TRACE}-${SENDER_SPAN}-01` },
  );
  assert.equal(tested.status, 200, tested.text);

  // A schedule every second: its first run. (The test app runs the worker, not the schedule loop: serve starts both.)
  const schedules = startSchedules(f.t.deps);
  const ticking = await saveOk(f, {
    wf_params: { name: 'Ticks', is_active: true },
    step_params: [{ key: 'echo', type: 'transform', config: { expression: 'payload' } }],
    trigger_params: [{ key: 'tick', type: 'schedule', cron: '* * * * * *' }],
  });
  let tickRun: any;
  for (const deadline = Date.now() + 30_000; tickRun === undefined;) {
    const list = await f.api.get(`${API}/workflow_runs?filter[workflow_id]=${ticking.workflow.id}&filter[status]=succeeded`);
    tickRun = list.body.data[0];
    assert.ok(tickRun !== undefined || Date.now() < deadline, 'a scheduled run finished');
    if (tickRun === undefined) await new Promise((resolve) => setTimeout(resolve, 100));
  }
  await schedules.stop();

  const shown = await f.api.get(`${API}/workflow_runs/${runId}`);
  assert.equal(shown.status, 200, shown.text);
  const sparse = await f.api.get(`${API}/workflow_runs?fields[workflow_run]=trace_id&filter[workflow_id]=${saved.workflow.id}`);
  assert.equal(sparse.status, 200, sparse.text);
  // Closing sends what is still buffered.
  await f.close();
  const spans = receiver.spans;
  const inTrace = spans.filter((s) => s.traceId === TRACE_ID);

  it('continues the sender trace: every span of the delivery, run, steps and call has its trace id', () => {
    assert.deepEqual(inTrace.map((s) => s.name).sort(), [
      'POST /api/v1/webhooks/:token',
      'provider.call POST',
      'workflow.run',
      'workflow.step http_request',
      'workflow.step transform',
    ]);
    assert.ok(inTrace.every((s) => s.service === 'tributary-test'));
  });

  it('parents each span on the one before: sender -> delivery -> run -> steps -> call', () => {
    const delivery = one(inTrace, 'delivery span', (s) => s.kind === KIND.server);
    assert.equal(delivery.parentSpanId, SENDER_SPAN);
    assert.equal(delivery.attributes['http.route'], '/api/v1/webhooks/:token');
    assert.equal(delivery.attributes['http.response.status_code'], 202);
    assert.equal(delivery.attributes['tributary.run.id'], runId);
    assert.equal(delivery.attributes['tributary.delivery.outcome'], 'accepted');
    const runSpan = one(inTrace, 'run span', (s) => s.name === 'workflow.run');
    assert.equal(runSpan.kind, KIND.consumer);
    assert.equal(runSpan.parentSpanId, delivery.spanId);
    assert.equal(runSpan.attributes['tributary.run.id'], runId);
    assert.equal(runSpan.attributes['tributary.run.attempt'], 1);
    assert.equal(runSpan.attributes['tributary.run.outcome'], 'completed');
    for (const [key, type] of [
      ['shape', 'transform'],
      ['call', 'http_request'],
    ]) {
      const step = one(inTrace, `${key} step span`, (s) => s.attributes['tributary.step.key'] === key);
      assert.equal(step.parentSpanId, runSpan.spanId);
      assert.equal(step.name, `workflow.step ${type}`);
      assert.equal(step.attributes['tributary.step.type'], type);
      assert.equal(step.attributes['tributary.run.attempt'], 1);
      assert.equal(step.attributes['tributary.step.outcome'], 'succeeded');
    }
    const callStep = one(inTrace, 'call step', (s) => s.attributes['tributary.step.key'] === 'call');
    const callSpan = one(inTrace, 'call span', (s) => s.kind === KIND.client);
    assert.equal(callSpan.parentSpanId, callStep.spanId);
    assert.equal(callSpan.attributes['tributary.connector.id'], connectorId);
    assert.equal(callSpan.attributes['tributary.operation'], 'POST');
    assert.equal(callSpan.attributes['http.request.method'], 'POST');
    assert.equal(callSpan.attributes['http.response.status_code'], 200);
    assert.equal(callSpan.attributes['server.address'], '127.0.0.1');
    assert.equal(callSpan.attributes['server.port'], Number(new URL(provider.url).port));
  });

  it('sends the call span as the traceparent of the provider call, with the sender tracestate', () => {
    const callSpan = one(inTrace, 'call span', (s) => s.kind === KIND.client);
    assert.equal(call!.headers.traceparent, `00-${TRACE_ID}-${callSpan.spanId}-01`);
    assert.equal(call!.headers.tracestate, 'vendor=abc');
  });

  it('shows the trace id on the run resource', () => {
    assert.equal(shown.body.data.attributes.trace_id, TRACE_ID);
    assert.deepEqual(sparse.body.data.find((r: { id: string }) => r.id === runId).attributes, { trace_id: TRACE_ID });
  });

  it('makes each attempt of a retried run its own span in the trace of its delivery, the failed one an error', () => {
    const traceId = retriedRun.attributes.trace_id as string;
    assert.match(traceId, /^[0-9a-f]{32}$/);
    const trace = spans.filter((s) => s.traceId === traceId);
    const delivery = one(trace, 'delivery span', (s) => s.kind === KIND.server);
    assert.equal(delivery.parentSpanId, undefined, 'the delivery started the trace');
    const attempts = trace
      .filter((s) => s.name === 'workflow.run')
      .sort((a, b) => Number(a.attributes['tributary.run.attempt']) - Number(b.attributes['tributary.run.attempt']));
    assert.deepEqual(
      attempts.map((s) => [s.parentSpanId, s.attributes['tributary.run.attempt'], s.attributes['tributary.run.status'], s.status.code ?? 0]),
      [
        [delivery.spanId, 1, 'retrying', ERROR],
        [delivery.spanId, 2, 'succeeded', 0],
      ],
    );
    assert.equal(attempts[0]!.attributes['error.type'], 'transient');
    const calls = trace
      .filter((s) => s.kind === KIND.client)
      .sort((a, b) => Number(a.attributes['http.response.status_code']) - Number(b.attributes['http.response.status_code']));
    assert.deepEqual(
      calls.map((s) => [s.attributes['http.response.status_code'], s.status.code ?? 0]),
      [
        [200, 0],
        [503, ERROR],
      ],
    );
    const failedStep = one(trace, 'failed step', (s) => s.spanId === calls[1]!.parentSpanId);
    assert.equal(failedStep.attributes['tributary.step.outcome'], 'failed');
    assert.equal(failedStep.status.code, ERROR);
    assert.equal(failedStep.status.message, 'The provider answered 503');
    assert.equal(failedStep.parentSpanId, attempts[0]!.spanId);
  });

  it('ignores a malformed traceparent: the delivery starts a new trace', () => {
    const traceId = malformedRun.attributes.trace_id as string;
    assert.match(traceId, /^[0-9a-f]{32}$/);
    assert.notEqual(traceId, '0'.repeat(32));
    const delivery = one(spans, 'delivery span', (s) => s.traceId === traceId && s.kind === KIND.server);
    assert.equal(delivery.parentSpanId, undefined);
  });

  it('runs a replay in a new trace from the replay request, linked to the original run', () => {
    const traceId = replayRun.attributes.trace_id as string;
    assert.notEqual(traceId, TRACE_ID);
    const request = one(spans, 'replay request span', (s) => s.traceId === traceId && s.kind === KIND.server);
    assert.equal(request.name, 'POST /api/json/v1/workflow_runs/:id/replay');
    assert.equal(request.attributes['tributary.run.replay_of'], runId);
    assert.deepEqual(
      request.links.map((l) => l.traceId),
      [TRACE_ID],
    );
    const runSpan = one(spans, 'replay run span', (s) => s.traceId === traceId && s.name === 'workflow.run');
    assert.equal(runSpan.parentSpanId, request.spanId);
    assert.equal(runSpan.attributes['tributary.run.replay_of'], runId);
  });

  it('starts a trace at a schedule tick: the run span is a child of the tick span', () => {
    const traceId = tickRun.attributes.trace_id as string;
    assert.match(traceId, /^[0-9a-f]{32}$/);
    const trace = spans.filter((s) => s.traceId === traceId);
    const tick = one(trace, 'tick span', (s) => s.name === 'workflow.schedule_tick');
    assert.equal(tick.kind, KIND.producer);
    assert.equal(tick.parentSpanId, undefined);
    assert.equal(tick.attributes['tributary.run.id'], tickRun.id);
    const runSpan = one(trace, 'run span', (s) => s.name === 'workflow.run');
    assert.equal(runSpan.parentSpanId, tick.spanId);
    assert.equal(runSpan.attributes['tributary.trigger.key'], 'tick');
  });

  it('traces a test run under its request: request -> workflow.test_run -> steps', () => {
    const trace = spans.filter((s) => s.traceId === TEST_TRACE);
    const request = one(trace, 'request span', (s) => s.kind === KIND.server);
    assert.equal(request.name, 'POST /api/json/v1/workflows/:id/test_run');
    assert.equal(request.parentSpanId, SENDER_SPAN);
    const testRun = one(trace, 'test run span', (s) => s.name === 'workflow.test_run');
    assert.equal(testRun.parentSpanId, request.spanId);
    assert.deepEqual(
      trace
        .filter((s) => s.parentSpanId === testRun.spanId)
        .map((s) => s.name)
        .sort(),
      ['workflow.step http_request', 'workflow.step transform'],
    );
    // call "none": no provider call, no client span.
    assert.equal(trace.filter((s) => s.kind === KIND.client).length, 0);
  });

  it('names spans by route pattern and puts no token, secret, query or payload in them', () => {
    const names = new Set(spans.map((s) => s.name));
    for (const name of names) assert.ok(!name.includes('tbwh_') && !name.includes('/orders/'), name);
    assert.ok(names.has('POST /api/v1/oauth/token'));
    assert.ok(names.has('GET /api/json/v1/workflow_runs/:id'));
    const text = JSON.stringify(spans);
    for (const secret of [token, f.bearer, f.tenant.clientSecret, CONNECTOR_SECRET, QUERY_SECRET, PAYLOAD_SECRET, 'Bearer', 'o-1'])
      assert.ok(!text.includes(secret), `${secret} in a span`);
  });

  it('sends OTEL_EXPORTER_OTLP_HEADERS with every export to <endpoint>/v1/traces', () => {
    assert.ok(receiver.exports.length >= 1);
    for (const h of receiver.exports) assert.equal(h['x-collector-key'], 'k=1');
  });
});

describe('tracing off', async () => {
  const provider = await mockProvider();
  after(() => provider.close());
  const f = await flowWith({});
  const connectorId = await shopConnector(f, provider);
  const saved = await saveOk(f, { step_params: orderSteps(connectorId) });
  const d = await deliver(f, `/api/v1/webhooks/${saved.tokens.hook!}`, JSON.stringify({ id: 'o-1' }), { traceparent: `00-${TRACE_ID}-${SENDER_SPAN}-01` });
  assert.equal(d.status, 202, d.text);
  const run = await waitForRun(f, d.body.workflow_run_id);

  it('shows no trace id and sends no traceparent, not even the sender one', () => {
    assert.equal(f.t.deps.tracing.enabled, false);
    assert.equal(run.attributes.status, 'succeeded');
    assert.equal(run.attributes.trace_id, null);
    const call = provider.requests.find((r) => r.path.startsWith('/orders/o-1'));
    assert.ok(call);
    assert.equal(call.headers.traceparent, undefined);
    assert.equal(call.headers.tracestate, undefined);
  });
});

interface Loads {
  packages: string[];
  importers: string[];
}

/**
 * A delivery and its run in a child process (test/fixtures/otel-loads-flow.ts) with the
 * module recorder preloaded: what it loaded of @opentelemetry, and which files asked for it.
 */
async function otelLoadsOfFlow(env: Record<string, string>): Promise<Loads & { run: { status: string; trace_id: string | null } }> {
  const vars: NodeJS.ProcessEnv = { ...process.env, ...env };
  const child = spawn(NODE, ['--import', './test/fixtures/record-otel-loads.ts', 'test/fixtures/otel-loads-flow.ts'], {
    cwd: ROOT,
    env: vars,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.setEncoding('utf8').on('data', (s: string) => (out += s));
  child.stderr.setEncoding('utf8').on('data', (s: string) => (err += s));
  const code = await new Promise((resolve) => child.on('exit', resolve));
  assert.equal(code, 0, `${out}${err}`);
  const line = /OTEL_MODULES (.*)\n/.exec(err);
  assert.ok(line, `the recorder reported: ${err}`);
  return { ...(JSON.parse(line[1]!) as Loads), run: JSON.parse(out.trim().split('\n').at(-1)!) };
}

const SRC_URL = `${pathToFileURL(path.join(ROOT, 'src'))}/`;

describe('OpenTelemetry is loaded only when an endpoint is set', () => {
  it(
    'a delivery and its run load nothing of the SDK without OTEL_EXPORTER_OTLP_ENDPOINT, and src/ asks for no module of it',
    { timeout: 120_000 },
    async () => {
      const loads = await otelLoadsOfFlow({});
      assert.deepEqual(loads.run, { status: 'succeeded', trace_id: null });
      assert.deepEqual(
        loads.importers.filter((u) => u.startsWith(SRC_URL)),
        [],
      );
      // prom-client (the metrics) requires the API package itself, for exemplars: a no-op facade without an SDK.
      assert.deepEqual(
        loads.packages.filter((p) => p !== '@opentelemetry/api'),
        [],
      );
    },
  );

  it('with the endpoint the SDK is loaded, by src/tracing-otel.ts (the recorder sees it)', { timeout: 120_000 }, async () => {
    const loads = await otelLoadsOfFlow({ OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${await freePort()}` });
    assert.equal(loads.run.status, 'succeeded');
    assert.equal(loads.run.trace_id, TRACE_ID);
    for (const p of ['@opentelemetry/sdk-trace', '@opentelemetry/exporter-trace-otlp-http', '@opentelemetry/core', '@opentelemetry/resources'])
      assert.ok(loads.packages.includes(p), `${p} in ${JSON.stringify(loads.packages)}`);
    assert.deepEqual(
      loads.importers.filter((u) => u.startsWith(SRC_URL)),
      [`${SRC_URL}tracing-otel.ts`],
    );
  });
});

describe('a collector that is down or refuses', () => {
  it('holds up no delivery and no run, and closing still ends (its wait is bounded)', { timeout: 60_000 }, async () => {
    const f = await flowWith({ OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${await freePort()}` });
    const saved = await saveOk(f, { step_params: [{ key: 'echo', type: 'transform', config: { expression: 'payload' } }] });
    const d = await deliver(f, `/api/v1/webhooks/${saved.tokens.hook!}`, '{"n": 1}');
    assert.equal(d.status, 202, d.text);
    const run = await waitForRun(f, d.body.workflow_run_id);
    assert.equal(run.attributes.status, 'succeeded');
    assert.match(run.attributes.trace_id, /^[0-9a-f]{32}$/);
    await f.close();
  });

  it('is logged once per outage, then once when it answers again', async () => {
    const lines: Array<Record<string, unknown>> = [];
    const results = [1, 1, 1, 0, 0, 1];
    const exporter = quietExporter(
      {
        export: (_spans, done) =>
          done({ code: results.shift()!, error: Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:4318'), { code: 'ECONNREFUSED' }) }),
        shutdown: async () => undefined,
      },
      capturingLogger(lines),
    );
    const codes: number[] = [];
    for (let i = 0; i < 6; i++) exporter.export([], (r) => codes.push(r.code));
    assert.deepEqual(codes, [1, 1, 1, 0, 0, 1], 'every outcome is passed on');
    assert.deepEqual(
      lines.map((l) => [l.level, l.msg]),
      [
        [40, 'could not send traces to the collector; spans are dropped until it answers'],
        [30, 'traces reach the collector again'],
        [40, 'could not send traces to the collector; spans are dropped until it answers'],
      ],
    );
    const err = lines[0]!.err as Record<string, unknown>;
    assert.deepEqual([err.message, err.code], ['connect ECONNREFUSED 127.0.0.1:4318', 'ECONNREFUSED']);
  });

  it('a collector answering 500: runs go on, the failure is logged at warn', { timeout: 60_000 }, async () => {
    const receiver = await otlpReceiver(500);
    after(() => receiver.close());
    const lines: Array<Record<string, unknown>> = [];
    const f = await flowWith({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url }, { log: capturingLogger(lines, 'warn') });
    const saved = await saveOk(f, { step_params: [{ key: 'echo', type: 'transform', config: { expression: 'payload' } }] });
    const d = await deliver(f, `/api/v1/webhooks/${saved.tokens.hook!}`, '{"n": 1}');
    const run = await waitForRun(f, d.body.workflow_run_id);
    assert.equal(run.attributes.status, 'succeeded');
    await f.close();
    assert.ok(receiver.exports.length >= 1, 'the collector was asked');
    const warned = lines.filter((l) => l.msg === 'could not send traces to the collector; spans are dropped until it answers');
    assert.equal(warned.length, 1, JSON.stringify(lines));
  });
});

describe('a worker in another process', { skip: !process.env.DATABASE_URL }, async () => {
  const receiver = await otlpReceiver();
  after(() => receiver.close());
  const f = await flowWith({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_SERVICE_NAME: 'tributary-api' }, { worker: false });
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tributary-otel-worker-'));
  after(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  const env = {
    PATH: process.env.PATH,
    DATA_DIR: dataDir,
    DATABASE_URL: f.t.config.databaseUrl,
    LOG_LEVEL: 'info',
    LOG_FORMAT: 'json',
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_SERVICE_NAME: 'tributary-worker',
  };
  const child = spawn(NODE, ['src/main.ts', 'worker'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (s: string) => (out += s));
  child.stderr.setEncoding('utf8').on('data', (s: string) => (out += s));
  const exited = new Promise((resolve) => child.on('exit', resolve));
  after(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });
  const saved = await saveOk(f, { step_params: [{ key: 'echo', type: 'transform', config: { expression: 'payload' } }] });
  const d = await deliver(f, `/api/v1/webhooks/${saved.tokens.hook!}`, '{"n": 1}', { traceparent: `00-${TRACE_ID}-${SENDER_SPAN}-01` });
  assert.equal(d.status, 202, d.text);
  const run = await waitForRun(f, d.body.workflow_run_id, 90_000);
  // Both processes send what they hold as they stop.
  child.kill('SIGTERM');
  await exited;
  await f.close();

  it('continues the delivery trace: the run span of the worker process is a child of the delivery span of the API process', () => {
    assert.equal(run.attributes.status, 'succeeded', out);
    assert.equal(run.attributes.trace_id, TRACE_ID);
    const inTrace = receiver.spans.filter((s) => s.traceId === TRACE_ID);
    const delivery = one(inTrace, 'delivery span', (s) => s.kind === KIND.server);
    const runSpan = one(inTrace, 'run span', (s) => s.name === 'workflow.run');
    assert.equal(delivery.service, 'tributary-api');
    assert.equal(runSpan.service, 'tributary-worker');
    assert.equal(runSpan.parentSpanId, delivery.spanId);
    assert.equal(one(inTrace, 'step span', (s) => s.name === 'workflow.step transform').parentSpanId, runSpan.spanId);
  });
});
