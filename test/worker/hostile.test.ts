/**
 * Hostile workflows end as a failed step with a clear error; the worker keeps serving
 * other runs and the HTTP API keeps answering meanwhile.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { sql } from 'kysely';
import { createModel, deliver, saveOk, startFlow, waitForRun, type Flow } from '../webhooks/helpers.ts';

const f: Flow = await startFlow();
await createModel(f, 'rows', [{ name: 'row_id', type: 'string' }, { name: 'n', type: 'integer' }]);

async function runOf(expression: string, payload: unknown = {}) {
  const { tokens } = await saveOk(f, { step_params: [{ key: 'evil', type: 'transform', config: { expression } }] });
  const d = await deliver(f, `/api/v1/webhooks/${tokens.hook}`, JSON.stringify(payload));
  assert.equal(d.status, 202, d.text);
  return waitForRun(f, d.body.workflow_run_id, 30_000);
}

function failedWith(run: any, pattern: RegExp) {
  assert.equal(run.attributes.status, 'failed', JSON.stringify(run.attributes));
  assert.equal(run.attributes.attempt, 1, 'not retried');
  assert.match(run.attributes.error, pattern);
  assert.equal(run.attributes.steps[0].status, 'failed');
}

describe('hostile expressions fail their step', () => {
  it('endless recursion: the time limit', async () => {
    failedWith(await runOf('($f := function(){ $f() }; $f())'), /ran longer than 1000 ms/);
  });

  it('deep recursion: the depth limit', async () => {
    failedWith(await runOf('($f := function($n){ $n = 0 ? 0 : 1 + $f($n - 1) }; $f(100000))'), /deeper than 300 levels/);
  });

  it('a huge result: the size limit', async () => {
    failedWith(await runOf('$string([1..2000000])'), /larger than 1048576 bytes/);
  });

  it('a huge $pad: refused before it allocates', async () => {
    failedWith(await runOf('$pad("x", 1000000000)'), /\$pad width/);
  });

  it('the API answers while a long expression runs', async () => {
    // The work done, not a duration: how often the event loop came round while the run ran,
    // away from its first and last 100 ms (claiming, recording). An expression that held the
    // loop for its whole time budget leaves none there.
    const turns: number[] = [];
    const ticker = setInterval(() => turns.push(Date.now()), 5);
    try {
      const { tokens } = await saveOk(f, { step_params: [{ key: 'spin', type: 'transform', config: { expression: '$sum($map([1..5000000], function($v){ $v * 2 }))' } }] });
      const d = await deliver(f, `/api/v1/webhooks/${tokens.hook}`, '{"spin":1}');
      await new Promise((resolve) => setTimeout(resolve, 100));
      const health = await fetch(`${f.t.url}/healthz`);
      assert.equal(health.status, 200);
      const run = await waitForRun(f, d.body.workflow_run_id);
      failedWith(run, /ran longer than 1000 ms/);
      const [from, to] = [Date.parse(run.attributes.started_at), Date.parse(run.attributes.finished_at)];
      const during = turns.filter((at) => at >= from + 100 && at <= to - 100).length;
      assert.ok(during >= 3, `the event loop came round ${during} times in the run's ${to - from} ms`);
    } finally {
      clearInterval(ticker);
    }
  });
});

describe('for_each', () => {
  const writer = (n: number) =>
    saveOk(f, {
      step_params: [{ key: 'store', type: 'write_fact', config: { data_model_slug: 'rows', for_each: `[1..${n}]`, mapping: { row_id: '"r" & $string(item) & "-" & payload.batch', n: 'item' } } }],
    });

  it('10,001 items: fails naming the cap, stores nothing', async () => {
    const { tokens } = await writer(10_001);
    const d = await deliver(f, `/api/v1/webhooks/${tokens.hook}`, '{"batch":"big"}');
    const run = await waitForRun(f, d.body.workflow_run_id, 30_000);
    failedWith(run, /10001 items; a write_fact step stores at most 10000/);
  });

  it('10,000 items: stores them all, once', async () => {
    const { tokens } = await writer(10_000);
    const d = await deliver(f, `/api/v1/webhooks/${tokens.hook}`, '{"batch":"ok"}');
    const run = await waitForRun(f, d.body.workflow_run_id, 60_000);
    assert.equal(run.attributes.status, 'succeeded', JSON.stringify(run.attributes.error));
    assert.deepEqual(run.attributes.steps[0].output, { data_model_slug: 'rows', items: 10_000, written: 10_000, duplicates: 0 });
    const n = await sql<{ n: string }>`select count(*) as n from facts where data->>'row_id' like '%-ok'`.execute(f.t.deps.db);
    assert.equal(Number(n.rows[0]!.n), 10_000);
  });

  it('one bad item fails the step before any fact of it is stored', async () => {
    const { tokens } = await saveOk(f, {
      step_params: [{ key: 'store', type: 'write_fact', config: { data_model_slug: 'rows', for_each: 'payload.items', mapping: { row_id: 'item.id', n: 'item.n' } } }],
    });
    const d = await deliver(f, `/api/v1/webhooks/${tokens.hook}`, JSON.stringify({ items: [{ id: 'a1', n: 1 }, { id: 'a2', n: 'two' }, { id: 'a3', n: 3 }] }));
    const run = await waitForRun(f, d.body.workflow_run_id);
    failedWith(run, /item 1: data\/n/);
    const n = await sql<{ n: string }>`select count(*) as n from facts where data->>'row_id' in ('a1', 'a3')`.execute(f.t.deps.db);
    assert.equal(Number(n.rows[0]!.n), 0);
  });
});

describe('after all that', () => {
  it('a normal run still succeeds', async () => {
    const run = await runOf('payload.x + 1', { x: 41 });
    assert.equal(run.attributes.status, 'succeeded');
    assert.equal(run.attributes.steps[0].output, 42);
  });
});
