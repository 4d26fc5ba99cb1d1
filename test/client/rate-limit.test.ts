/**
 * The SDK honours a real 429: a trigger allowed one delivery per 1-second window answers the
 * second with Retry-After, and sendWebhook waits that long and sends the same delivery again.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { createClient, TributaryError } from '../../packages/client/src/index.ts';
import { saveOk, startFlow } from '../webhooks/helpers.ts';

const f = await startFlow({ WEBHOOK_RATE_LIMIT_MAX: '1', WEBHOOK_RATE_LIMIT_WINDOW_SECONDS: '1' }, { worker: false });
/** A trigger of its own per test: the limit counts per trigger. */
async function freshTrigger(name: string): Promise<string> {
  const saved = await saveOk(f, { wf_params: { name, is_active: true }, step_params: [{ key: 'note', type: 'transform', config: { expression: 'payload' } }] });
  return saved.tokens.hook!;
}

function client(maxAttempts = 5) {
  const waits: number[] = [];
  const answers: Array<{ status: number; retryAfter: string | null; key: string | null }> = [];
  const c = createClient({
    baseUrl: f.t.url,
    clientId: f.tenant.clientId,
    clientSecret: f.tenant.clientSecret,
    maxAttempts,
    // Waits for real (the server's window must pass) but records what it was asked to wait.
    sleep: (ms) => {
      waits.push(ms);
      return new Promise((resolve) => setTimeout(resolve, ms));
    },
    fetch: async (input, init) => {
      const res = await fetch(input, init);
      if (new URL(String(input)).pathname.startsWith('/api/v1/webhooks/'))
        answers.push({ status: res.status, retryAfter: res.headers.get('retry-after'), key: new Headers(init?.headers).get('idempotency-key') });
      return res;
    },
  });
  return { c, waits, answers };
}

it('a 429 with Retry-After is waited out and the same delivery sent again', async () => {
  const trigger = await freshTrigger('Limited A');
  const { c, waits, answers } = client();
  // Three at once, one allowed per window: however the windows fall, at least one is refused first.
  const ids = ['rl-1', 'rl-2', 'rl-3'];
  const results = await Promise.all(ids.map((deliveryId, n) => c.sendWebhook(trigger, { n }, { deliveryId })));
  assert.deepEqual(
    results.map((r) => r.status),
    ['accepted', 'accepted', 'accepted'],
  );
  const limited = answers.filter((a) => a.status === 429);
  assert.ok(limited.length >= 1, JSON.stringify(answers));
  assert.equal(answers.filter((a) => a.status === 202).length, 3);
  // Every wait is the Retry-After the server gave for that attempt.
  assert.deepEqual(
    waits,
    limited.map((a) => Number(a.retryAfter) * 1000),
  );
  // Each delivery kept its own id on every attempt: one 202 per id, no other key sent.
  for (const id of ids) assert.equal(answers.filter((a) => a.key === id && a.status === 202).length, 1);
  assert.ok(answers.every((a) => a.key !== null && ids.includes(a.key)));
  assert.equal(answers.length, 3 + limited.length);
});

it('with one attempt allowed, the 429 is the answer: a TributaryError carrying the webhook text', async () => {
  const trigger = await freshTrigger('Limited B');
  const { c, answers } = client(1);
  const results = await Promise.allSettled([1, 2, 3].map((n) => c.sendWebhook(trigger, { n })));
  const refused = results.filter((r) => r.status === 'rejected');
  assert.ok(refused.length >= 1, JSON.stringify(answers));
  for (const r of refused) {
    const err = (r as PromiseRejectedResult).reason;
    assert.ok(err instanceof TributaryError);
    assert.equal(err.status, 429);
    assert.equal(err.code, 'Rate limit exceeded');
    assert.equal(err.attempts, 1);
  }
  assert.equal(answers.length, 3);
});
