/**
 * The expression pool on its own: results in order, a child that dies is replaced, budgets
 * end a child without touching this process, and an idle pool holds nothing open.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { createExpressionPool } from '../../src/expressions/expression-pool.ts';
import { ExpressionError, ExpressionPoolError } from '../../src/expressions/expressions.ts';

const pool = createExpressionPool({ processes: 2, memoryMb: 64, timeoutMs: 1000 });
after(() => pool.close());

describe('the expression pool', () => {
  it('answers one row, or one row per item of forEach, in order', async () => {
    assert.deepEqual(await pool.run({ workspace: 'w', input: { payload: { a: 2 } }, expressions: ['payload.a * 3', 'payload.missing', '"x"'] }), [
      [6, undefined, 'x'],
    ]);
    const rows = await pool.run({ workspace: 'w', input: { payload: { n: 10 } }, forEach: '[1..3]', expressions: ['item * payload.n', 'index'] });
    assert.deepEqual(rows, [
      [10, 0],
      [20, 1],
      [30, 2],
    ]);
  });

  it('a forEach past maxItems fails naming the cap', async () => {
    await assert.rejects(
      pool.run({ workspace: 'w', input: {}, forEach: '[1..11]', expressions: ['item'], maxItems: 10 }),
      /11 items; a write_fact step stores at most 10/,
    );
  });

  it('a child killed from outside under a job fails that job only, not as the error of the expression; the next job runs on a fresh child', async () => {
    const job = pool.run({ workspace: 'w', input: { s: 'a'.repeat(200_000) }, expressions: ['$match(s, /^a*a*b$/)'] });
    // Wait until a child holds it, then kill every child from outside.
    await new Promise((resolve) => setTimeout(resolve, 300));
    const { execFileSync } = await import('node:child_process');
    execFileSync('pkill', ['-KILL', '-P', String(process.pid), '-f', 'expression-child']);
    // The watchdog may have ended it first (the expression's own fault); else the outside signal is named, and a step retries on it.
    await assert.rejects(
      job,
      (err: Error) =>
        (err instanceof ExpressionError && /time budget/.test(err.message)) ||
        (err instanceof ExpressionPoolError && /ended by SIGKILL from outside the pool/.test(err.message)),
    );
    assert.deepEqual(await pool.run({ workspace: 'w', input: {}, expressions: ['1 + 1'] }), [[2]]);
  });

  it('a child outlives a SIGTERM, SIGINT or SIGHUP sent from outside (as a service manager sends), in a process group of its own', async () => {
    const { execFileSync } = await import('node:child_process');
    // A job of a few hundred ms on a pool of its own with a long budget, so the signals reach a child at work.
    const own = createExpressionPool({ processes: 1, memoryMb: 64, timeoutMs: 20_000 });
    after(() => own.close());
    // Started and ready (its handlers in place) before the signals.
    await own.run({ workspace: 'w', input: {}, expressions: ['1'] });
    await pool.run({ workspace: 'w', input: {}, expressions: ['1'] });
    const job = own.run({ workspace: 'w', input: {}, expressions: ['$count([1..60000].($string($)))'] });
    await new Promise((resolve) => setTimeout(resolve, 100));
    const pids = execFileSync('pgrep', ['-P', String(process.pid), '-f', 'expression-child'], { encoding: 'utf8' })
      .trim()
      .split(/\s+/);
    assert.ok(pids.length > 0);
    for (const pid of pids) {
      const pgid = execFileSync('ps', ['-o', 'pgid=', '-p', pid], { encoding: 'utf8' }).trim();
      assert.equal(pgid, pid, 'each child leads its own process group');
      for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.kill(Number(pid), signal);
    }
    assert.deepEqual(await job, [[60000]]);
    for (const pid of pids) assert.doesNotThrow(() => process.kill(Number(pid), 0), `child ${pid} is still alive`);
  });

  it('an allocation past the heap budget ends its child, not this process', async () => {
    const heapBefore = process.memoryUsage().heapUsed;
    await assert.rejects(
      pool.run({ workspace: 'w', input: {}, expressions: ['$count([1..9999999] ~> $map(function($v){ {"v": $v} }))'] }),
      /exceeded its (memory budget \(64 MB\)|1 s time budget)/,
    );
    assert.ok(process.memoryUsage().heapUsed - heapBefore < 64 * 1_048_576, 'this process did not take on the allocation');
    assert.deepEqual(await pool.run({ workspace: 'w', input: {}, expressions: ['"still here"'] }), [['still here']]);
  });

  it('a step that kills its child in a batch fails alone; its batch-mates succeed', async () => {
    const jobs = Array.from({ length: 40 }, (_, i) =>
      i === 7
        ? pool.run({ workspace: 'w', input: { s: 'a'.repeat(200_000) }, expressions: ['$match(s, /^a*a*b$/)'] })
        : pool.run({ workspace: 'w', input: { i }, expressions: ['i * 2'] }),
    );
    const settled = await Promise.allSettled(jobs);
    settled.forEach((r, i) => {
      if (i === 7)
        assert.ok(r.status === 'rejected' && /exceeded its 1 s time budget/.test(String(r.reason)), String(r.status === 'rejected' ? r.reason : 'fulfilled'));
      else assert.deepEqual(r, { status: 'fulfilled', value: [[i * 2]] });
    });
  });

  it('never runs more children than its size, however many jobs wait', async () => {
    const jobs = Array.from({ length: 20 }, (_, i) => pool.run({ workspace: 'w', input: { i }, expressions: ['i'] }));
    assert.ok(pool.processes() <= 2);
    assert.deepEqual(
      await Promise.all(jobs),
      Array.from({ length: 20 }, (_, i) => [[i]]),
    );
  });
});
