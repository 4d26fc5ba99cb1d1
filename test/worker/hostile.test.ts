/**
 * Hostile workflows end as a failed step with a clear error; the worker keeps serving
 * other runs and the HTTP API keeps answering meanwhile.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { sql } from 'kysely';
import { createModel, deliver, saveOk, startFlow, waitForRun, type Flow } from '../webhooks/helpers.ts';

const f: Flow = await startFlow();
await createModel(f, 'rows', [
  { name: 'row_id', type: 'string' },
  { name: 'n', type: 'integer' },
]);

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
    failedWith(await runOf('($f := function(){ $f() }; $f())'), /exceeded its 1 s time budget/);
  });

  it('deep recursion: the depth limit', async () => {
    failedWith(await runOf('($f := function($n){ $n = 0 ? 0 : 1 + $f($n - 1) }; $f(100000))'), /depth budget \(300 levels\)/);
  });

  it('a huge result: the size limit', async () => {
    // About 2 MB of text: past the 1 MiB budget, and quick enough to reach it well before the time budget on a busy machine.
    failedWith(await runOf('$string([1..300000])'), /size budget \(1048576 bytes\)/);
  });

  it('a huge $pad: refused before it allocates', async () => {
    failedWith(await runOf('$pad("x", 1000000000)'), /\$pad width/);
  });

  it('a regular expression that backtracks past the budget: its process is ended, the run fails for good', async () => {
    // Two quantifiers over the same atom pass the save-time guard (three do not); on 100,000 a's they never end.
    failedWith(await runOf('$match(payload.s, /^a*a*b$/)', { s: 'a'.repeat(100_000) }), /exceeded its 1 s time budget/);
  });

  it('a sort of a million numbers: a budget, not the heap of this process', async () => {
    const run = await runOf('$count($sort([1..1000000]))');
    failedWith(run, /exceeded its (memory budget \(128 MB\)|1 s time budget)/);
  });

  it('a ten-million-item string: a budget, never succeeded', async () => {
    failedWith(await runOf('$string([1..9999999])'), /exceeded its (memory budget|1 s time budget)|size budget/);
  });

  it('the API answers while a long expression runs', async () => {
    const { tokens } = await saveOk(f, { step_params: [{ key: 'spin', type: 'transform', config: { expression: '$match(payload.s, /^a*a*b$/)' } }] });
    const d = await deliver(f, `/api/v1/webhooks/${tokens.hook}`, JSON.stringify({ s: 'a'.repeat(100_000) }));
    const status = async () =>
      (await f.t.deps.db.selectFrom('workflow_runs').select('status').where('id', '=', d.body.workflow_run_id).executeTakeFirstOrThrow()).status;
    // Health checks answered while the run is still running: none could be, were the expression on this event loop.
    let answeredWhileRunning = 0;
    while ((await status()) !== 'failed') {
      const health = await fetch(`${f.t.url}/healthz`);
      assert.equal(health.status, 200);
      if ((await status()) === 'running') answeredWhileRunning++;
    }
    assert.ok(answeredWhileRunning >= 3, `only ${answeredWhileRunning} health checks were answered while the expression ran`);
    failedWith(await waitForRun(f, d.body.workflow_run_id), /exceeded its 1 s time budget/);
  });
});

describe('for_each', () => {
  const writer = (n: number) =>
    saveOk(f, {
      step_params: [
        {
          key: 'store',
          type: 'write_fact',
          config: { data_model_slug: 'rows', for_each: `[1..${n}]`, mapping: { row_id: '"r" & $string(item) & "-" & payload.batch', n: 'item' } },
        },
      ],
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
      step_params: [
        { key: 'store', type: 'write_fact', config: { data_model_slug: 'rows', for_each: 'payload.items', mapping: { row_id: 'item.id', n: 'item.n' } } },
      ],
    });
    const d = await deliver(
      f,
      `/api/v1/webhooks/${tokens.hook}`,
      JSON.stringify({
        items: [
          { id: 'a1', n: 1 },
          { id: 'a2', n: 'two' },
          { id: 'a3', n: 3 },
        ],
      }),
    );
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
