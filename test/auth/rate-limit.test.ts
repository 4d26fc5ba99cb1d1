/**
 * The per-account JSON:API rate window: RateLimit-Policy/RateLimit
 * headers, 429 rate_limited with Retry-After, one window per service account, and with
 * REDIS_URL one window shared by every process.
 */
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { redisLimiter } from '../../src/limiter.ts';
import { jsonApi, seedAccount, seedTenant, startApp, tokenFor, type TestApp } from '../helpers/app.ts';

const MAX = 5;
const WINDOW = 60;

let t: TestApp;

before(async () => {
  t = await startApp({ RATE_LIMIT_MAX: String(MAX), RATE_LIMIT_WINDOW_SECONDS: String(WINDOW) });
});
after(async () => {
  await t?.close();
});

/** Windows align to the clock; start well inside one so a boundary cannot reset the count mid-test. */
async function awayFromWindowEdge(windowSeconds: number, marginMs = 8_000): Promise<void> {
  const size = windowSeconds * 1000;
  const left = size - (Date.now() % size);
  if (left < marginMs) await sleep(left + 100);
}

function parseRateLimit(value: string | null): { r: number; t: number } {
  const m = /^"default";r=(\d+);t=(\d+)$/.exec(value ?? '');
  assert.ok(m, `RateLimit header malformed: ${value}`);
  return { r: Number(m[1]), t: Number(m[2]) };
}

test('the 6th request of a window is 429 rate_limited; another account of the workspace is unaffected', async () => {
  const tenant = await seedTenant(t.deps);
  const neighbour = await seedAccount(t.deps, tenant);
  const api = jsonApi(t, await tokenFor(t, tenant));
  const other = jsonApi(t, await tokenFor(t, neighbour));
  await awayFromWindowEdge(WINDOW);

  for (let i = 1; i <= MAX; i++) {
    const res = await api.get('/api/json/v1/organizations');
    assert.equal(res.status, 200, `request ${i}: ${res.text}`);
    assert.equal(res.headers.get('ratelimit-policy'), `"default";q=${MAX};w=${WINDOW}`);
    const rl = parseRateLimit(res.headers.get('ratelimit'));
    assert.equal(rl.r, MAX - i, `remaining after request ${i}`);
    assert.ok(rl.t >= 1 && rl.t <= WINDOW, `reset ${rl.t}`);
  }

  const limited = await api.get('/api/json/v1/organizations');
  assert.equal(limited.status, 429, limited.text);
  assert.match(limited.headers.get('content-type') ?? '', /^application\/vnd\.api\+json/);
  assert.equal(limited.body.errors.length, 1);
  assert.equal(limited.body.errors[0].status, '429');
  assert.equal(limited.body.errors[0].code, 'rate_limited');
  assert.equal(limited.body.data, undefined);
  const retryAfter = limited.headers.get('retry-after');
  assert.match(retryAfter ?? '', /^\d+$/);
  assert.ok(Number(retryAfter) >= 1 && Number(retryAfter) <= WINDOW, `Retry-After ${retryAfter}`);
  assert.equal(limited.headers.get('ratelimit-policy'), `"default";q=${MAX};w=${WINDOW}`);
  assert.equal(parseRateLimit(limited.headers.get('ratelimit')).r, 0);

  // Still limited on the next request, on writes too.
  assert.equal((await api.get('/api/json/v1/credentials')).status, 429);
  assert.equal((await api.post('/api/json/v1/data_models', { data: { type: 'data_model', attributes: { name: 'X', slug: 'rl-x' } } })).status, 429);

  // The window is per account: a neighbour in the same workspace starts fresh.
  const fresh = await other.get('/api/json/v1/organizations');
  assert.equal(fresh.status, 200, fresh.text);
  assert.equal(parseRateLimit(fresh.headers.get('ratelimit')).r, MAX - 1);

  // A new token of the limited account does not reset its window.
  const again = jsonApi(t, await tokenFor(t, tenant));
  assert.equal((await again.get('/api/json/v1/organizations')).status, 429);
});

test('requests without a valid token are not counted against an account', async () => {
  const tenant = await seedTenant(t.deps);
  const api = jsonApi(t, await tokenFor(t, tenant));
  await awayFromWindowEdge(WINDOW);
  for (let i = 0; i < MAX + 2; i++) assert.equal((await jsonApi(t, 'garbage').get('/api/json/v1/organizations')).status, 401);
  const res = await api.get('/api/json/v1/organizations');
  assert.equal(res.status, 200);
  assert.equal(parseRateLimit(res.headers.get('ratelimit')).r, MAX - 1);
});

test('with REDIS_URL, two limiters on two connections share one window', { skip: process.env.REDIS_URL ? false : 'REDIS_URL is not set' }, async () => {
  const a = redisLimiter(new Redis(process.env.REDIS_URL!, { maxRetriesPerRequest: 2 }), Date.now);
  const b = redisLimiter(new Redis(process.env.REDIS_URL!, { maxRetriesPerRequest: 2 }), Date.now);
  try {
    const key = `test:${randomBytes(8).toString('hex')}`;
    await awayFromWindowEdge(WINDOW);
    const r1 = await a.hit(key, 3, WINDOW);
    const r2 = await b.hit(key, 3, WINDOW);
    const r3 = await a.hit(key, 3, WINDOW);
    const r4 = await b.hit(key, 3, WINDOW);
    assert.deepEqual(
      [r1, r2, r3, r4].map((r) => [r.allowed, r.remaining, r.limit]),
      [
        [true, 2, 3],
        [true, 1, 3],
        [true, 0, 3],
        [false, 0, 3],
      ],
    );
    for (const r of [r1, r2, r3, r4]) assert.ok(r.resetSeconds >= 1 && r.resetSeconds <= WINDOW, `reset ${r.resetSeconds}`);
    // Another key has its own window.
    const other = await b.hit(`${key}:other`, 3, WINDOW);
    assert.equal(other.remaining, 2);
  } finally {
    await a.close();
    await b.close();
  }
});
