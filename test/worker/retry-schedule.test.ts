/**
 * Retries over hours: the next attempt waits the RUN_RETRY_SCHEDULE entry for it (its last
 * entry past the list) plus up to 10% jitter, or a provider's longer Retry-After up to
 * RUN_RETRY_AFTER_MAX. The worker runs on a clock the test moves, past each interval.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { ConfigError, loadConfig } from '../../src/config.ts';
import { retryDelayMs } from '../../src/worker/execute.ts';
import { startWorker } from '../../src/worker/worker.ts';
import { API, createModel, deliver, saveOk, startFlow, type Flow } from '../webhooks/helpers.ts';
import { mockProvider } from '../connectors/mock-provider.ts';

const S = 1000;
const M = 60 * S;
const H = 60 * M;

describe('RUN_RETRY_SCHEDULE and RUN_RETRY_AFTER_MAX', () => {
  const refused = (env: Record<string, string>, message: string) =>
    assert.throws(
      () => loadConfig(env),
      (err: unknown) => err instanceof ConfigError && err.message === `Invalid configuration: ${message}`,
      message,
    );

  it('defaults reach hours; durations in ms, s, m, h, d', () => {
    const d = loadConfig({});
    assert.deepEqual(d.runRetrySchedule, [1 * M, 10 * M, 1 * H, 6 * H]);
    assert.equal(d.runRetryAfterMaxMs, 1 * H);
    assert.equal(d.runMaxAttempts, 5);
    const c = loadConfig({ RUN_RETRY_SCHEDULE: '500ms, 30s,2m,15m,1h,6h,1d', RUN_RETRY_AFTER_MAX: '2h' });
    assert.deepEqual(c.runRetrySchedule, [500, 30 * S, 2 * M, 15 * M, 1 * H, 6 * H, 24 * H]);
    assert.equal(c.runRetryAfterMaxMs, 2 * H);
  });

  it('bad values are refused, naming the setting', () => {
    const units = 'such as 30s, 15m, 6h or 1d (units ms, s, m, h, d)';
    refused({ RUN_RETRY_SCHEDULE: '30' }, `RUN_RETRY_SCHEDULE must be comma-separated durations ${units}, got "30"`);
    refused({ RUN_RETRY_SCHEDULE: '30s,,2m' }, `RUN_RETRY_SCHEDULE must be comma-separated durations ${units}, got ""`);
    refused({ RUN_RETRY_SCHEDULE: '1.5h' }, `RUN_RETRY_SCHEDULE must be comma-separated durations ${units}, got "1.5h"`);
    refused({ RUN_RETRY_SCHEDULE: '-1m' }, `RUN_RETRY_SCHEDULE must be comma-separated durations ${units}, got "-1m"`);
    refused({ RUN_RETRY_SCHEDULE: '5 minutes' }, `RUN_RETRY_SCHEDULE must be comma-separated durations ${units}, got "5 minutes"`);
    refused({ RUN_RETRY_SCHEDULE: '0s' }, 'RUN_RETRY_SCHEDULE durations must be between 1ms and 7d, got "0s"');
    refused({ RUN_RETRY_SCHEDULE: '1m,8d' }, 'RUN_RETRY_SCHEDULE durations must be between 1ms and 7d, got "8d"');
    refused({ RUN_RETRY_SCHEDULE: Array(101).fill('1m').join(',') }, 'RUN_RETRY_SCHEDULE must list at most 100 durations, got 101');
    refused({ RUN_RETRY_BASE_MS: '1000' }, 'RUN_RETRY_BASE_MS is no longer read: set RUN_RETRY_SCHEDULE instead (comma-separated waits such as 1m,10m,1h,6h)');
    refused({ RUN_RETRY_AFTER_MAX: '1h,2h' }, 'RUN_RETRY_AFTER_MAX must be one duration such as 1h, got "1h,2h"');
    refused({ RUN_RETRY_AFTER_MAX: '3600' }, `RUN_RETRY_AFTER_MAX must be a duration ${units}, got "3600"`);
  });

  it("a provider's Retry-After is honoured when longer than the schedule's wait, up to its cap", () => {
    const retry = { schedule: [1 * M, 10 * M], retryAfterMaxMs: 1 * H };
    const none = () => 0;
    assert.equal(retryDelayMs(1, retry, undefined, none), 1 * M);
    assert.equal(retryDelayMs(1, retry, 5 * S, none), 1 * M, 'shorter than the schedule: the schedule');
    assert.equal(retryDelayMs(1, retry, 15 * M, none), 15 * M);
    assert.equal(retryDelayMs(1, retry, 2 * H, none), 1 * H, 'capped');
    assert.equal(
      retryDelayMs(2, retry, undefined, () => 1),
      11 * M,
      'at most 10% jitter',
    );
    assert.equal(retryDelayMs(9, retry, undefined, none), 10 * M, 'past the list: its last entry');
  });
});

describe('a provider down for hours', async () => {
  // The default schedule (1m, 10m, 1h, 6h) and Retry-After cap (1h).
  const f: Flow = await startFlow({ ALLOW_PRIVATE_EGRESS: 'true', RUN_RETRY_SCHEDULE: '', WORKER_POLL_MS: '20' }, { worker: false });
  const mock = await mockProvider();
  after(() => mock.close());
  await createModel(f, 'orders', [{ name: 'order_id', type: 'string' }]);
  const c = await f.api.post(`${API}/external_connectors`, {
    data: {
      type: 'external_connector',
      attributes: {
        name: 'Orders',
        direction: 'outbound',
        provider_slug: 'tributary-orders',
        secret: `key_${'r'.repeat(40)}`,
        config: { base_url: `${mock.url}/v1` },
      },
    },
  });
  assert.equal(c.status, 201, c.text);
  const { tokens } = await saveOk(f, {
    step_params: [
      {
        key: 'call',
        type: 'http_request',
        config: { connector_id: c.body.data.id, operation_ref: 'createOrder', body: '{"customer_id": payload.id, "items": []}' },
      },
      { key: 'store', type: 'write_fact', config: { data_model_slug: 'orders', mapping: { order_id: 'payload.id' } } },
    ],
  });

  // The worker's clock: the test moves it instead of waiting.
  let offset = 0;
  const clock = () => Date.now() + offset;
  const worker = startWorker({ ...f.t.deps, clock });
  after(() => worker.stop(1000));

  const row = (id: string) =>
    f.t.deps.db
      .selectFrom('workflow_runs')
      .select(['status', 'attempt', 'run_at', 'updated_at', 'outcome', 'facts_written'])
      .where('id', '=', id)
      .executeTakeFirstOrThrow();
  async function until(id: string, ok: (r: Awaited<ReturnType<typeof row>>) => boolean): Promise<Awaited<ReturnType<typeof row>>> {
    const deadline = Date.now() + 10_000;
    for (;;) {
      const r = await row(id);
      if (ok(r)) return r;
      if (Date.now() > deadline) assert.fail(`run ${id} is ${JSON.stringify(r)}`);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }
  /** The wait the run was given: from the failed attempt's record to its next attempt. */
  const waited = (r: Awaited<ReturnType<typeof row>>) => new Date(r.run_at).getTime() - new Date(r.updated_at).getTime();
  const calls = () => mock.requests.filter((r) => r.path === '/v1/orders').length;
  /** Moves the worker's clock to `ms` after the run's next attempt time (negative: before it). */
  const moveTo = (r: Awaited<ReturnType<typeof row>>, ms: number) => {
    offset = new Date(r.run_at).getTime() + ms - Date.now();
  };

  it('down for the first two intervals: retried after each, then completed', async () => {
    mock.script('/v1/orders', { status: 503 }, { status: 503 }, { status: 201, body: { id: 'ord_abcdefgh', status: 'open' } });
    const before = calls();
    const d = await deliver(f, `/api/v1/webhooks/${tokens.hook}`, JSON.stringify({ id: 'r-1' }));
    assert.equal(d.status, 202, d.text);
    const id: string = d.body.workflow_run_id;

    const first = await until(id, (r) => r.status === 'retrying' && r.attempt === 1);
    assert.equal(first.outcome, null, 'no outcome while retrying');
    assert.ok(waited(first) >= 1 * M - S && waited(first) <= 1.1 * M, `waited ${waited(first)} ms`);
    // Just before the interval is over: not yet.
    moveTo(first, -S);
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.equal(calls(), before + 1);
    assert.equal((await row(id)).status, 'retrying');

    moveTo(first, 1);
    const second = await until(id, (r) => r.status === 'retrying' && r.attempt === 2);
    assert.equal(calls(), before + 2);
    assert.ok(waited(second) >= 10 * M - S && waited(second) <= 11 * M, `waited ${waited(second)} ms`);

    moveTo(second, 1);
    const done = await until(id, (r) => r.status !== 'retrying' && r.status !== 'running' && r.attempt === 3);
    assert.equal(done.status, 'succeeded');
    assert.equal(done.outcome, 'completed');
    assert.equal(done.facts_written, 1);
    assert.equal(calls(), before + 3);
  });

  it("a Retry-After longer than the schedule's wait is honoured, up to RUN_RETRY_AFTER_MAX", async () => {
    mock.script(
      '/v1/orders',
      { status: 503, headers: { 'retry-after': '7200' } },
      { status: 429, headers: { 'retry-after': '900' } },
      { status: 201, body: { id: 'ord_abcdefgh', status: 'open' } },
    );
    const d = await deliver(f, `/api/v1/webhooks/${tokens.hook}`, JSON.stringify({ id: 'r-2' }));
    assert.equal(d.status, 202, d.text);
    const id: string = d.body.workflow_run_id;
    const first = await until(id, (r) => r.status === 'retrying' && r.attempt === 1);
    // Two hours asked, one allowed.
    assert.ok(Math.abs(waited(first) - 1 * H) <= S, `waited ${waited(first)} ms`);
    moveTo(first, 1);
    const second = await until(id, (r) => r.status === 'retrying' && r.attempt === 2);
    // 15 minutes asked: longer than the schedule's 10 (and its jitter), so 15.
    assert.ok(Math.abs(waited(second) - 15 * M) <= S, `waited ${waited(second)} ms`);
    moveTo(second, 1);
    const done = await until(id, (r) => r.status === 'succeeded');
    assert.equal(done.outcome, 'completed');
  });
});
