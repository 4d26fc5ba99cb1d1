/**
 * The SDK's retry rules with a fake fetch (no server: the answers are scripted): 503 and 429
 * with and without Retry-After, capped attempts and total time, full jitter, the same
 * Idempotency-Key on every retry, and which answers are never retried.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { backoffMs, createClient, retryAfterMs, TributaryError, type RetryPolicy } from '../../packages/client/src/index.ts';

const TOKEN = new Response(JSON.stringify({ access_token: 'tok-1', token_type: 'bearer', expires_in: 900 }), { status: 200 });
const doc = (status: number) => new Response(JSON.stringify({ data: { type: 'data_model', id: 'm1', attributes: { slug: 's' } } }), { status });

/** A client over scripted answers; its clock moves only when it sleeps, so no test waits. */
function scripted(answers: Array<() => Response>, opts: { maxAttempts?: number; maxElapsedMs?: number; random?: () => number } = {}) {
  let now = 1_000_000;
  const waits: number[] = [];
  const calls: Array<{ path: string; headers: Headers; body: string }> = [];
  const c = createClient({
    baseUrl: 'http://tributary.invalid',
    clientId: 'tbci_x',
    clientSecret: 'tbcs_y',
    clock: () => now,
    sleep: async (ms) => {
      waits.push(ms);
      now += ms;
    },
    random: opts.random ?? (() => 1),
    ...(opts.maxAttempts === undefined ? {} : { maxAttempts: opts.maxAttempts }),
    ...(opts.maxElapsedMs === undefined ? {} : { maxElapsedMs: opts.maxElapsedMs }),
    fetch: async (input, init) => {
      const path = new URL(String(input)).pathname;
      if (path === '/api/v1/oauth/token') return TOKEN.clone();
      calls.push({ path, headers: new Headers(init?.headers), body: String(init?.body ?? '') });
      const next = answers.shift();
      if (!next) throw new Error('no more scripted answers');
      return next();
    },
  });
  return { c, waits, calls };
}

const unavailable = (retryAfter?: string) => () =>
  new Response(JSON.stringify({ errors: [{ status: '503', code: 'unavailable', detail: 'try later' }] }), {
    status: 503,
    headers: { 'x-request-id': 'req-503', ...(retryAfter === undefined ? {} : { 'retry-after': retryAfter }) },
  });

const create = (c: ReturnType<typeof createClient>) => c.create('data_models', { type: 'data_model', attributes: { name: 'n', slug: 's' } });

describe('retries on 503 and 429', () => {
  it('backs off exponentially with full jitter, capped at maxAttempts, with the same Idempotency-Key and body each time', async () => {
    const { c, waits, calls } = scripted([unavailable(), unavailable(), unavailable(), unavailable()], { maxAttempts: 4 });
    await assert.rejects(create(c), (err: unknown) => {
      assert.ok(err instanceof TributaryError);
      assert.equal(err.status, 503);
      assert.equal(err.code, 'unavailable');
      assert.equal(err.requestId, 'req-503');
      assert.equal(err.attempts, 4);
      return true;
    });
    assert.equal(calls.length, 4);
    // random() = 1 gives each ceiling: 500, 1000, 2000 ms.
    assert.deepEqual(waits, [500, 1000, 2000]);
    const keys = new Set(calls.map((x) => x.headers.get('idempotency-key')));
    assert.equal(keys.size, 1);
    assert.match([...keys][0] ?? '', /^[0-9a-f-]{36}$/);
    assert.equal(new Set(calls.map((x) => x.body)).size, 1);
  });

  it('jitter is a uniform draw below the ceiling', () => {
    const policy = { baseDelayMs: 500, capDelayMs: 30_000, random: () => 0.25 } as RetryPolicy;
    assert.equal(backoffMs(policy, 1), 125);
    assert.equal(backoffMs(policy, 3), 500);
    assert.equal(backoffMs(policy, 20), 7500);
  });

  it('stops when the next wait would pass maxElapsedMs', async () => {
    const { c, waits, calls } = scripted([unavailable(), unavailable(), unavailable(), unavailable(), unavailable()], { maxAttempts: 10, maxElapsedMs: 2000 });
    await assert.rejects(create(c), { status: 503, attempts: 3 });
    assert.deepEqual(waits, [500, 1000]);
    assert.equal(calls.length, 3);
  });

  it('honours Retry-After (seconds or a date) and goes on when the server answers', async () => {
    const { c, waits, calls } = scripted([
      unavailable('3'),
      () => new Response('{"errors":[{"code":"rate_limited"}]}', { status: 429, headers: { 'retry-after': '1' } }),
      () => doc(201),
    ]);
    const r = await c.create('data_models', { type: 'data_model', attributes: { name: 'n', slug: 's' } }, { idempotencyKey: 'mine-1' });
    assert.equal(r.data.id, 'm1');
    assert.deepEqual(waits, [3000, 1000]);
    assert.deepEqual(
      calls.map((x) => x.headers.get('idempotency-key')),
      ['mine-1', 'mine-1', 'mine-1'],
    );
    assert.equal(retryAfterMs(new Date(10_000).toUTCString(), 4000), 6000);
    assert.equal(retryAfterMs('soon', 0), undefined);
  });

  it('a Retry-After longer than the time left is not waited for', async () => {
    const { c, waits } = scripted([unavailable('120')], { maxElapsedMs: 60_000 });
    await assert.rejects(create(c), { status: 503, attempts: 1 });
    assert.deepEqual(waits, []);
  });

  it('retries a request that got no answer, then says so', async () => {
    const refused = () => {
      throw new TypeError('fetch failed');
    };
    const { c, calls } = scripted([refused, refused, refused], { maxAttempts: 3 });
    await assert.rejects(create(c), (err: unknown) => {
      assert.ok(err instanceof TributaryError);
      assert.equal(err.status, 0);
      assert.equal(err.code, 'no_answer');
      assert.equal(err.attempts, 3);
      assert.ok(!err.message.includes('tbcs_y'));
      return true;
    });
    assert.equal(calls.length, 3);
  });

  it("the caller's abort is not retried", async () => {
    const aborted = () => {
      throw new DOMException('This operation was aborted', 'AbortError');
    };
    const { c, calls } = scripted([aborted, aborted]);
    await assert.rejects(c.create('data_models', { type: 'data_model', attributes: { name: 'n', slug: 's' } }, { signal: AbortSignal.abort() }), {
      name: 'AbortError',
    });
    assert.equal(calls.length, 1);
  });

  it('never retries 403, 404, 409, 413 or 422', async () => {
    for (const status of [403, 404, 409, 413, 422]) {
      const { c, calls } = scripted([() => new Response(JSON.stringify({ errors: [{ code: `c${status}` }] }), { status })]);
      await assert.rejects(create(c), { status, code: `c${status}`, attempts: 1 });
      assert.equal(calls.length, 1);
    }
  });

  it('a webhook: 401 Unauthorized is not re-exchanged; 503 retried with the same delivery id', async () => {
    const denied = scripted([() => new Response('{"error":"Unauthorized"}', { status: 401 })]);
    await assert.rejects(denied.c.sendWebhook('tbwh_t', { a: 1 }), { status: 401, code: 'Unauthorized' });
    assert.equal(denied.calls.length, 1);
    assert.equal(denied.c.exchanges, 1);

    const busy = scripted([
      () => new Response('{"error":"Processing temporarily unavailable"}', { status: 503, headers: { 'retry-after': '2' } }),
      () => new Response('{"error":"Processing temporarily unavailable"}', { status: 503 }),
      () => new Response('{"status":"accepted","workflow_run_id":"r1"}', { status: 202 }),
    ]);
    const r = await busy.c.sendWebhook('tbwh_t', { a: 1 }, { deliveryId: 'd-7' });
    assert.equal(r.status, 'accepted');
    assert.deepEqual(busy.waits, [2000, 1000]);
    assert.deepEqual(
      busy.calls.map((x) => x.headers.get('idempotency-key')),
      ['d-7', 'd-7', 'd-7'],
    );
  });
});
