/**
 * The queue and the worker: a crashed worker's run is claimed again when its lease runs
 * out, write_fact stores each fact once however often its step runs, attempts are capped,
 * a stopping worker releases what it could not finish.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { sql } from 'kysely';
import { claimRuns, finishRuns, reclaimExpired, LEASE_LOST, leaseLostTooOften } from '../../src/runs/queue.sql.ts';
import { executeRun, backoffMs, truthy } from '../../src/worker/execute.ts';
import { startWorker } from '../../src/worker/worker.ts';
import { createDb } from '../../src/db/connect.ts';
import { API, createModel, deliver, saveOk, startFlow, waitForRun, type Flow } from '../webhooks/helpers.ts';

const f: Flow = await startFlow({ RUN_MAX_ATTEMPTS: '3', WORKER_LEASE_SECONDS: '2' }, { worker: false });
await createModel(f, 'items', [
  { name: 'item_id', type: 'string' },
  { name: 'qty', type: 'integer' },
]);
const { tokens } = await saveOk(f, {
  step_params: [
    { key: 'lines', type: 'transform', config: { expression: 'payload.lines' } },
    { key: 'store', type: 'write_fact', config: { data_model_slug: 'items', for_each: 'steps.lines', mapping: { item_id: 'item.sku', qty: 'item.qty' } } },
  ],
});
const path = `/api/v1/webhooks/${tokens.hook}`;
const db = f.t.deps.db;
const env = { db, clock: () => Date.now(), expressions: f.t.deps.expressions, outputMaxBytes: f.t.deps.config.runRecord.outputBytes };
const lease = (ms: number) => new Date(Date.now() + ms);
const RETRY = { schedule: [10], retryAfterMaxMs: 3_600_000 };
const factCount = async () => Number((await sql<{ n: string }>`select count(*) as n from facts`.execute(db)).rows[0]!.n);
const runRow = (id: string) => db.selectFrom('workflow_runs').selectAll().where('id', '=', id).executeTakeFirstOrThrow();

describe('leases', () => {
  it("a dead worker's run is reclaimed after its lease, and its facts are stored once", async () => {
    const d = await deliver(
      f,
      path,
      JSON.stringify({
        lines: [
          { sku: 'a', qty: 1 },
          { sku: 'b', qty: 2 },
          { sku: 'c', qty: 3 },
        ],
      }),
    );
    const before = await factCount();
    // A worker claims the run, runs its steps (the facts are written), and dies before recording the outcome.
    const [claimed] = await claimRuns(db, 'dead-worker', 10, new Date(), lease(100));
    assert.equal(claimed!.id, d.body.workflow_run_id);
    const first = await executeRun(env, claimed!, RETRY);
    assert.equal(first.status, 'succeeded');
    assert.equal(await factCount(), before + 3);
    // Nobody else can claim it while the lease holds.
    assert.deepEqual(await claimRuns(db, 'other', 10, new Date(), lease(1000)), []);
    // The clock moves past the 100 ms lease rather than the test sleeping through it.
    const later = () => Date.now() + 150;
    assert.equal(await reclaimExpired(db, new Date(later()), 3), 1);
    assert.equal((await runRow(claimed!.id)).status, 'retrying');
    // A real worker, on the moved clock, takes it over; the step runs again and stores nothing twice.
    const w = startWorker({ ...f.t.deps, clock: later });
    try {
      const run = await waitForRun(f, claimed!.id);
      assert.equal(run.attributes.status, 'succeeded');
      assert.equal(run.attributes.attempt, 2);
      assert.equal(run.attributes.outcome, 'completed');
      assert.deepEqual(run.attributes.steps[1].output, { data_model_slug: 'items', items: 3, written: 0, duplicates: 3 });
      assert.equal(await factCount(), before + 3);
    } finally {
      await w.stop(1000);
    }
    // The dead worker's late outcome is refused: it no longer holds the run.
    assert.deepEqual(await finishRuns(db, 'dead-worker', [{ id: claimed!.id, outcome: first }], new Date()), new Set());
  });

  it('a run whose worker keeps dying fails after max_attempts with the lease-lost error', async () => {
    const d = await deliver(f, path, JSON.stringify({ lines: [], dying: true }));
    for (let attempt = 1; attempt <= 3; attempt++) {
      const [claimed] = await claimRuns(db, `dying-${attempt}`, 10, new Date(), lease(-1));
      assert.equal(claimed?.attempt, attempt);
      await reclaimExpired(db, new Date(), 10);
    }
    const row = await runRow(d.body.workflow_run_id);
    assert.equal(row.status, 'failed');
    assert.equal(row.outcome, 'dead_letter', 'a lost worker is a passing failure: the last attempt spent, a dead letter');
    assert.equal(row.error, LEASE_LOST);
    assert.ok(row.finished_at instanceof Date);
  });

  it('a run that keeps killing its workers fails after RUN_MAX_LEASE_LOSSES, attempts left or not', async () => {
    const d = await deliver(f, path, JSON.stringify({ lines: [], poison: true }));
    const [first] = await claimRuns(db, 'crashed-1', 10, new Date(), lease(-1));
    assert.equal(first!.id, d.body.workflow_run_id);
    await reclaimExpired(db, new Date(), 2);
    assert.equal((await runRow(first!.id)).status, 'retrying');
    assert.equal((await runRow(first!.id)).outcome, null);
    const [second] = await claimRuns(db, 'crashed-2', 10, new Date(), lease(-1));
    assert.equal(second!.id, first!.id);
    await reclaimExpired(db, new Date(), 2);
    const row = await runRow(first!.id);
    assert.equal(row.status, 'failed');
    assert.equal(row.attempt, 2, 'attempts were left (max 3)');
    assert.equal(row.lease_losses, 2);
    assert.equal(row.error, leaseLostTooOften(2));
    assert.equal(row.outcome, 'failed');
    assert.ok(row.finished_at instanceof Date);
    // Failed for good: no worker claims it again.
    assert.deepEqual(await claimRuns(db, 'w', 10, new Date(), lease(1000)), []);
  });

  it('two workers never claim the same run', async () => {
    for (let i = 0; i < 20; i++) await deliver(f, path, JSON.stringify({ lines: [], i }));
    const [a, b] = await Promise.all([claimRuns(db, 'w-a', 15, new Date(), lease(60_000)), claimRuns(db, 'w-b', 15, new Date(), lease(60_000))]);
    const ids = [...a, ...b].map((r) => r.id);
    assert.equal(ids.length, 20);
    assert.equal(new Set(ids).size, 20);
    await sql`update workflow_runs set status = 'succeeded', locked_by = null where locked_by in ('w-a', 'w-b')`.execute(db);
  });
});

describe('stopping', () => {
  it('releases runs still executing after the grace period, the attempt not counted', async () => {
    // Runs until the expression time limit (1 s) ends it.
    const slow = await saveOk(f, {
      step_params: [{ key: 'spin', type: 'transform', config: { expression: '$sum($map([1..5000000], function($v){ $v * 2 }))' } }],
    });
    const d = await deliver(f, `/api/v1/webhooks/${slow.tokens.hook}`, '{"slow":true}');
    const w = startWorker(f.t.deps);
    try {
      const deadline = Date.now() + 5000;
      while (w.inFlight() === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 1));
      assert.equal(w.inFlight(), 1);
    } finally {
      await w.stop(0);
    }
    const row = await runRow(d.body.workflow_run_id);
    assert.equal(row.status, 'retrying');
    assert.equal(row.attempt, 0);
    assert.equal(row.locked_by, null);
    // Let the abandoned evaluation end before the next test's worker starts.
    await new Promise((resolve) => setTimeout(resolve, 1200));
    await sql`update workflow_runs set status = 'succeeded' where id = ${d.body.workflow_run_id}`.execute(db);
  });
});

describe('retries', () => {
  it('backoff follows the schedule, its last entry past it, with up to 10% jitter added', () => {
    const schedule = [30_000, 120_000, 3_600_000];
    assert.equal(
      backoffMs(1, schedule, () => 0),
      30_000,
    );
    assert.equal(
      backoffMs(1, schedule, () => 1),
      33_000,
    );
    assert.equal(
      backoffMs(2, schedule, () => 0),
      120_000,
    );
    assert.equal(
      backoffMs(3, schedule, () => 1),
      3_960_000,
    );
    assert.equal(
      backoffMs(30, schedule, () => 0),
      3_600_000,
    );
  });

  it('a transient failure is retried; a permanent one is not', async () => {
    const d = await deliver(f, path, JSON.stringify({ lines: [{ sku: 'x', qty: 1 }], flaky: true }));
    const [claimed] = await claimRuns(db, 'flaky', 10, new Date(), lease(60_000));
    assert.equal(claimed?.id, d.body.workflow_run_id);
    // A database that cannot be reached (nothing listens on port 1): a transient error.
    const unreachable = createDb({ databaseUrl: 'postgres://nobody@127.0.0.1:1/none', connectTimeoutMs: 1000 });
    const transient = await executeRun({ ...env, db: unreachable.db }, claimed!, RETRY).finally(() => unreachable.db.destroy());
    assert.equal(transient.status, 'retrying');
    assert.ok(transient.runAt instanceof Date);
    assert.match(transient.error!, /Step store failed: The database was unavailable/);
    const permanent = await executeRun(env, { ...claimed!, payload: { lines: [{ sku: 'x', qty: 'many' }] } }, RETRY);
    assert.equal(permanent.status, 'failed');
    assert.match(permanent.error!, /item 0: data\/qty/);
    await finishRuns(db, 'flaky', [{ id: d.body.workflow_run_id, outcome: transient }], new Date());
    assert.equal((await runRow(d.body.workflow_run_id)).status, 'retrying');
  });

  it('a condition is JSONata-truthy', () => {
    for (const v of [false, null, undefined, 0, '', [], {}, [0, '']]) assert.equal(truthy(v), false, JSON.stringify(v));
    for (const v of [true, 1, 'x', [0, 1], { a: 1 }]) assert.equal(truthy(v), true, JSON.stringify(v));
  });
});

describe('start latency', () => {
  it('a queued run starts on its 202 (in-process signal), not on the next poll', async () => {
    // The worker's one poll is at its start; the next would be a minute away, past waitForRun's 15 s.
    const w = startWorker({ ...f.t.deps, config: { ...f.t.deps.config, workerPollMs: 60_000 } });
    try {
      await new Promise((resolve) => setTimeout(resolve, 50));
      const d = await deliver(f, path, JSON.stringify({ lines: [], latency: true }));
      await waitForRun(f, d.body.workflow_run_id);
      const listed = await f.api.get(`${API}/workflow_runs/${d.body.workflow_run_id}`);
      assert.equal(listed.body.data.attributes.status, 'succeeded');
    } finally {
      await w.stop(1000);
    }
  });
});
