/**
 * The expression pool is fair between workspaces (issue 34): waiting work is served
 * round-robin by workspace, so one workspace's queue delays another's job by at most one
 * evaluation per child; and a job's time budget counts its evaluation, not its wait.
 * Asserted as the order work is done in, never as a time.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { createExpressionPool } from '../../src/expressions/expression-pool.ts';

// Some tens of ms of work a job, whatever the machine: enough that a batch of them takes a while.
const SLOW = '$count([1..2000].($ * 2))';

describe('the expression pool between workspaces', () => {
  it("one workspace's queue delays another's job by at most one of its evaluations per child", async () => {
    for (const processes of [1, 2]) {
      // Three full batches per child: FIFO would make B wait for at least two of them on each.
      const total = 48 * processes;
      const pool = createExpressionPool({ processes, memoryMb: 128, timeoutMs: 5000 });
      after(() => pool.close());
      let aDone = 0;
      // Each job says when its evaluation started, on the child's clock ($millis is fixed for one evaluation).
      const a = Array.from({ length: total }, (_, i) =>
        pool.run({ workspace: 'A', input: { i }, expressions: [SLOW, '$millis()'] }).then((rows) => {
          aDone++;
          return rows[0]![1] as number;
        }),
      );
      // A's batches are on every child before B asks.
      while (aDone === 0) await new Promise((resolve) => setTimeout(resolve, 5));
      const before = aDone;
      const queuedAt = Date.now();
      const b = await pool.run({ workspace: 'B', input: {}, expressions: ['$millis()'] }).then((rows) => ({ at: rows[0]![0] as number, aDone }));
      const startedMeanwhile = (await Promise.all(a)).filter((at) => at >= queuedAt && at < b.at).length;
      assert.equal(aDone, total);
      if (processes === 1) {
        // The child finishes the evaluation it is in, then runs B's. queuedAt is this process's
        // clock before the give-back is sent: on a loaded machine one more of A's may start while
        // that message is on its way (failed so in CI at 2). FIFO would start a batch of 16 or more.
        assert.ok(startedMeanwhile <= 2, `${startedMeanwhile} of A's evaluations started while B's waited on one child`);
      } else {
        // Replies come a batch at a time, so what finished meanwhile is at most the batch each
        // child held when B came (16 each); FIFO would have B wait for A's 64 queued jobs too.
        const finishedMeanwhile = b.aDone - before;
        assert.ok(finishedMeanwhile <= 32, `${finishedMeanwhile} of A's jobs finished while B's waited on ${processes} children`);
      }
      await pool.close();
    }
  });

  it('two queued workspaces are served in turn', async () => {
    const pool = createExpressionPool({ processes: 1, memoryMb: 128, timeoutMs: 5000 });
    after(() => pool.close());
    const order: string[] = [];
    // Queued before the child is up: the first batches are built from both queues.
    const jobs = [
      ...Array.from({ length: 30 }, () => pool.run({ workspace: 'A', input: {}, expressions: ['"a"'] }).then(() => order.push('A'))),
      ...Array.from({ length: 30 }, () => pool.run({ workspace: 'B', input: {}, expressions: ['"b"'] }).then(() => order.push('B'))),
    ];
    await Promise.all(jobs);
    for (let n = 2; n <= 60; n += 2) {
      const prefix = order.slice(0, n);
      const as = prefix.filter((w) => w === 'A').length;
      assert.ok(Math.abs(as - (n - as)) <= 16, `after ${n}: ${as} of A, ${n - as} of B: ${order.join('')}`);
    }
    const firstTwenty = order.slice(0, 20);
    assert.ok(firstTwenty.filter((w) => w === 'B').length >= 8, `B waited behind A's queue: ${order.join('')}`);
    await pool.close();
  });
});
