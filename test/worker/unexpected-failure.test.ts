/**
 * A step that fails in a way none of our failures names fails its run for good, with the
 * record's usual text, and the worker's warn line of the attempt holds the error itself (its stack) with the run's id.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import pino from 'pino';
import { startWorker } from '../../src/worker/worker.ts';
import { deliver, saveOk, startFlow, waitForRun } from '../webhooks/helpers.ts';

const f = await startFlow({}, { worker: false });
const { tokens } = await saveOk(f, { step_params: [{ key: 'shape', type: 'transform', config: { expression: 'payload' } }] });

describe('an unexpected step failure', () => {
  it('is logged with its error and stack, and recorded as before', async () => {
    const lines: Array<Record<string, any>> = [];
    const log = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
    // An evaluation that breaks as no expression error does (a defect, not the step's fault).
    const expressions = { ...f.t.deps.expressions, run: async () => Promise.reject(new TypeError('the pool broke')) };
    const w = startWorker({ ...f.t.deps, log, expressions });
    try {
      const d = await deliver(f, `/api/v1/webhooks/${tokens.hook}`, JSON.stringify({ a: 1 }));
      assert.equal(d.status, 202, d.text);
      const run = await waitForRun(f, d.body.workflow_run_id);
      assert.equal(run.attributes.status, 'failed');
      assert.equal(run.attributes.error, 'Step shape failed: The step failed unexpectedly');
      const line = lines.find((l) => l.msg === 'workflow run failed');
      assert.ok(line, JSON.stringify(lines));
      assert.equal(line.level, 40);
      assert.equal(line.run, d.body.workflow_run_id);
      assert.equal(line.step, 'shape');
      assert.equal(line.code, 'unexpected');
      assert.equal(line.error, 'The step failed unexpectedly');
      assert.equal(line.err?.message, 'the pool broke');
      assert.match(line.err?.stack ?? '', /TypeError: the pool broke\n\s+at /);
    } finally {
      await w.stop(1000);
    }
  });
});
