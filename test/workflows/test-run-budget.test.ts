/**
 * A step's time budget counts its evaluation, not its wait (issue 34): six concurrent test
 * runs of many steps whose outputs are large share one expression child, so each step waits
 * behind the others' and its input (every earlier output) takes a while to cross; no step
 * fails for the time budget, since each evaluation alone is far within it.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { API, saveOk, startFlow, type Flow } from '../webhooks/helpers.ts';

const RUNS = 6;
const STEPS = 20;
const f: Flow = await startFlow(
  {
    TEST_RUN_CONCURRENCY: String(RUNS),
    TEST_RUN_EXPRESSION_PROCESSES: '1',
    // The budget is the subject, not the priority: the machine's other load must not starve the child.
    TEST_RUN_EXPRESSION_PRIORITY: '0',
    EXPRESSION_MEMORY_MB: '512',
    // Short: what a wait counted against it would exceed at once.
    EXPRESSION_TIMEOUT_MS: '300',
  },
  {},
);
// Each step gives 256 KB (cheap to build), so the last steps' inputs hold several MB.
const steps = Array.from({ length: STEPS }, (_, i) => ({
  key: `s${i}`,
  type: 'transform',
  config: { expression: '$join([1..4].$pad("", 65536, "x"))' },
}));
const { workflow } = await saveOk(f, { step_params: steps });

describe('the time budget of a test run step', () => {
  it('is not spent waiting for the pool', async () => {
    const answers = await Promise.all(
      Array.from({ length: RUNS }, () =>
        f.api.post(`${API}/workflows/${workflow.id}/test_run`, { data: { type: 'workflow_test_run', attributes: { payload: {} } } }),
      ),
    );
    for (const r of answers) {
      assert.equal(r.status, 200, r.text.slice(0, 500));
      const a = r.body.data.attributes;
      assert.equal(
        a.status,
        'succeeded',
        `${a.error}: ${JSON.stringify(a.steps.map((s: any) => [s.key, s.status, s.error]).filter((s: any) => s[2] !== null))}`,
      );
      assert.equal(a.steps.length, STEPS);
    }
  });
});
