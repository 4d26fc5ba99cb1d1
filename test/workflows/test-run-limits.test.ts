/**
 * Test runs are a bounded class apart that never delays runs (issue 34): one workspace
 * flooding test runs whose expression backtracks (each within its budget, ended by the
 * pool's watchdog) gets 429 `rate_limited` with Retry-After past its concurrency and its
 * window, and another workspace's ordinary webhook runs keep their latency: under the
 * flood, the slowest of B's runs stays under 10 times its quiet median plus 2 s (a
 * generous bound: before, they waited behind the flood's evaluations for many seconds).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { jsonApi, seedTenant, tokenFor } from '../helpers/app.ts';
import { API, deliver, saveOk, startFlow, waitForRun, type Flow } from '../webhooks/helpers.ts';

const CONCURRENCY = 2;
const RATE_MAX = 8;
const f: Flow = await startFlow({
  EXPRESSION_PROCESSES: '2',
  TEST_RUN_CONCURRENCY: String(CONCURRENCY),
  TEST_RUN_RATE_MAX: String(RATE_MAX),
  TEST_RUN_RATE_WINDOW_SECONDS: '60',
});
// Workspace A floods; workspace B (another organization) runs its ordinary workflow.
const backtracking = await saveOk(f, {
  step_params: [{ key: 'slow', type: 'transform', config: { expression: '$eval("$match(payload.s, /(a+)+$/)")' } }],
});
const tenantB = await seedTenant(f.t.deps);
const bearerB = await tokenFor(f.t, tenantB);
const b: Flow = { t: f.t, tenant: tenantB, api: jsonApi(f.t, bearerB), bearer: bearerB };
const ordinary = await saveOk(b, {
  step_params: [
    { key: 'shape', type: 'transform', config: { expression: '{"id": payload.id, "total": payload.total * 2}' } },
    { key: 'big', type: 'condition', config: { expression: 'steps.shape.total > 1' } },
  ],
});
const hook = `/api/v1/webhooks/${ordinary.tokens.hook}`;

let seq = 0;
async function runOfB(waitMs = 60_000): Promise<number> {
  const started = Date.now();
  const d = await deliver(b, hook, JSON.stringify({ id: `o-${++seq}`, total: 3 }), { 'idempotency-key': `b-${seq}` });
  assert.equal(d.status, 202, d.text);
  const run = await waitForRun(b, d.body.workflow_run_id, waitMs);
  assert.equal(run.attributes.status, 'succeeded', JSON.stringify(run.attributes));
  return Date.now() - started;
}

const pct = (xs: number[], p: number) => [...xs].sort((x, y) => x - y)[Math.min(xs.length - 1, Math.ceil((p / 100) * xs.length) - 1)]!;

describe('a flood of test runs', () => {
  it("is refused past the workspace's limits and does not delay another workspace's runs", async () => {
    const quiet: number[] = [];
    for (let i = 0; i < 5; i++) quiet.push(await runOfB());

    const bound = 10 * pct(quiet, 50) + 2000;
    const answers: Array<{ status: number; retryAfter: string | null; code?: string }> = [];
    let flooding = true;
    // 10 callers, each sending its next test run as soon as the last is answered (a tenth of a second after a refusal).
    const flood = Promise.all(
      Array.from({ length: 10 }, async () => {
        while (flooding) {
          const r = await f.api.post(`${API}/workflows/${backtracking.workflow.id}/test_run`, {
            data: { type: 'workflow_test_run', attributes: { payload: { s: `${'a'.repeat(40)}!` } } },
          });
          answers.push({ status: r.status, retryAfter: r.headers.get('retry-after'), code: r.body?.errors?.[0]?.code });
          if (r.status === 429) await new Promise((resolve) => setTimeout(resolve, 100));
        }
      }),
    );
    // The flood is on: the first wave is being answered.
    await new Promise((resolve) => setTimeout(resolve, 300));
    const loud: number[] = [];
    try {
      // Past the bound is a failure: there is no need to wait for more (nor much longer).
      for (let i = 0; i < 10 && !loud.some((ms) => ms > bound); i++) loud.push(await runOfB(bound + 30_000));
    } finally {
      flooding = false;
      await flood;
    }

    const admitted = answers.filter((a) => a.status === 200).length;
    const refused = answers.filter((a) => a.status === 429);
    assert.ok(refused.length > 0, `no 429 among ${answers.length} test runs`);
    for (const r of refused) {
      assert.equal(r.code, 'rate_limited');
      assert.match(r.retryAfter ?? '', /^\d+$/);
      assert.ok(Number(r.retryAfter) >= 1 && Number(r.retryAfter) <= 60, `Retry-After ${r.retryAfter}`);
    }
    assert.ok(admitted <= RATE_MAX, `${admitted} test runs admitted, past the window's ${RATE_MAX}`);
    assert.equal(answers.length, admitted + refused.length, JSON.stringify(answers.filter((a) => a.status !== 200 && a.status !== 429)));

    console.log(
      `B's run latency: quiet p50 ${pct(quiet, 50)} ms p99 ${pct(quiet, 99)} ms; under the flood p50 ${pct(loud, 50)} ms p99 ${pct(loud, 99)} ms (bound ${bound} ms); A: ${admitted} admitted, ${refused.length} refused`,
    );
    assert.ok(pct(loud, 99) <= bound, `B's slowest run under the flood took ${pct(loud, 99)} ms, past ${bound} ms (quiet: ${quiet.join(', ')} ms)`);
  });

  it("refuses a workspace's test runs past its window, one at a time or not", async () => {
    const tenantC = await seedTenant(f.t.deps);
    const bearerC = await tokenFor(f.t, tenantC);
    const c: Flow = { t: f.t, tenant: tenantC, api: jsonApi(f.t, bearerC), bearer: bearerC };
    const cheap = await saveOk(c, { step_params: [{ key: 'x', type: 'transform', config: { expression: 'payload.n + 1' } }] });
    // The window is aligned to the clock: one that ends meanwhile lets at most another RATE_MAX through.
    let admitted = 0;
    let refusal: any;
    for (let i = 0; i < 2 * RATE_MAX + 1 && refusal === undefined; i++) {
      const r = await c.api.post(`${API}/workflows/${cheap.workflow.id}/test_run`, { data: { type: 'workflow_test_run', attributes: { payload: { n: i } } } });
      if (r.status === 200) admitted++;
      else refusal = r;
    }
    assert.ok(refusal !== undefined, `${admitted} test runs in a row admitted`);
    assert.equal(refusal.status, 429, refusal.text);
    assert.equal(refusal.body.errors[0].code, 'rate_limited');
    assert.match(refusal.body.errors[0].detail, new RegExp(`limited to ${RATE_MAX} per 60 s`));
    const retryAfter = Number(refusal.headers.get('retry-after'));
    assert.ok(retryAfter >= 1 && retryAfter <= 60, `Retry-After ${retryAfter}`);
  });
});
