/**
 * A connector's rate budget (src/connectors/rate.ts): windows fixed and aligned to the
 * clock, and with each counter (in memory, in the database, in Redis when REDIS_URL is
 * set) at most `requests` calls admitted in a window while the calls over it wait for a
 * later window instead of failing.
 *
 * The clock is the test's: it stands a little before the end of a window, and a refused
 * call moves it to the same point of the next one, so a wait lasts that little (a few
 * milliseconds; longer with Redis, whose keys expire in real time).
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { createDb, type Db } from '../../src/db/connect.ts';
import { memoryLimiter, redisLimiter } from '../../src/limiter.ts';
import { databaseCounter, limiterCounter, rateLimitOf, rateUse, takeBudget, type RateLimit, type WindowCounter } from '../../src/connectors/rate.ts';
import { ENGINE, freshPostgresDatabase } from '../helpers/app.ts';
import { pgliteTemplate } from '../helpers/databases.ts';

/** A fixed start, so windows are the same on every run. */
const EPOCH = 1_800_000_000_000;

interface BudgetClock {
  now(): number;
  /** After a refusal at `from`: the same point before the end of the window after it. */
  passWindow(from: number): void;
}

function budgetClock(windowMs: number, marginMs: number): BudgetClock {
  let t = EPOCH + windowMs - marginMs;
  return {
    now: () => t,
    passWindow(from) {
      const next = (Math.floor(from / windowMs) + 2) * windowMs - marginMs;
      if (next > t) t = next;
    },
  };
}

/** The counter as takeBudget sees it, recording how many calls each window admitted. */
function watched(counter: WindowCounter, limit: RateLimit, clock: BudgetClock) {
  const admitted = new Map<number, number>();
  const keys = new Set<string>();
  let refused = 0;
  return {
    admitted,
    keys,
    refused: () => refused,
    counter: {
      async hit(key, windowMs, now) {
        keys.add(key);
        const count = await counter.hit(key, windowMs, now);
        const w = Math.floor(now / windowMs);
        if (count <= limit.requests) admitted.set(w, (admitted.get(w) ?? 0) + 1);
        else {
          refused++;
          clock.passWindow(now);
        }
        return count;
      },
      peek: (key, windowMs, now) => counter.peek(key, windowMs, now),
    } satisfies WindowCounter,
  };
}

/** Seven calls at once against a budget of three a window: three now, the rest later, never more than three a window. */
async function spendsWithinBudget(counter: (clock: BudgetClock) => WindowCounter, opts: { perSeconds: number; marginMs: number }): Promise<void> {
  const limit: RateLimit = { requests: 3, perSeconds: opts.perSeconds };
  const windowMs = opts.perSeconds * 1000;
  const clock = budgetClock(windowMs, opts.marginMs);
  const w = watched(counter(clock), limit, clock);
  const id = randomUUID();
  const callers = 7;
  const waits = await Promise.all(Array.from({ length: callers }, () => takeBudget(w.counter, id, limit, clock.now)));
  assert.deepEqual([...w.keys], [`connector:${id}`]);
  // Every call went through: over the budget, a call waits.
  assert.equal(
    [...w.admitted.values()].reduce((a, b) => a + b, 0),
    callers,
  );
  for (const [window, n] of w.admitted) assert.ok(n <= limit.requests, `window ${window} admitted ${n}`);
  assert.equal(w.admitted.get(Math.floor(EPOCH / windowMs)), 3);
  assert.ok(w.admitted.size >= Math.ceil(callers / limit.requests));
  assert.ok(w.refused() >= callers - limit.requests);
  // The first three did not wait; each other one waited until a later window.
  assert.equal(waits.filter((ms) => ms === 0).length, 3);
  for (const ms of waits.filter((x) => x !== 0)) assert.ok(ms >= opts.marginMs && ms % windowMs === 0, `waited ${ms}`);
}

/** A budget's use as rateUse reads it: the calls takeBudget counted in the window, then 0 in the next. */
async function peeksWithoutCounting(counter: (now: () => number) => WindowCounter): Promise<void> {
  let t = EPOCH + 100;
  const c = counter(() => t);
  const id = randomUUID();
  const limit = { requests: 5, perSeconds: 2 };
  assert.deepEqual(await rateUse(c, id, limit, t), { used: 0, remaining: 5, resetsAt: new Date(EPOCH + 2000) });
  for (let i = 0; i < 3; i++) await takeBudget(c, id, limit, () => t);
  assert.deepEqual(await rateUse(c, id, limit, t), { used: 3, remaining: 2, resetsAt: new Date(EPOCH + 2000) });
  assert.equal((await rateUse(c, id, limit, t)).used, 3);
  t = EPOCH + 2000;
  assert.deepEqual(await rateUse(c, id, limit, t), { used: 0, remaining: 5, resetsAt: new Date(EPOCH + 4000) });
}

describe('rateLimitOf', () => {
  it('reads {requests, per_seconds}, or nothing when it is absent or malformed', () => {
    assert.deepEqual(rateLimitOf({ rate_limit: { requests: 5, per_seconds: 1 } }), { requests: 5, perSeconds: 1 });
    assert.deepEqual(rateLimitOf({ base_url: 'x', rate_limit: { requests: 1, per_seconds: 0.5 } }), { requests: 1, perSeconds: 0.5 });
    for (const config of [null, {}, { rate_limit: null }, { rate_limit: [5, 1] }, { rate_limit: { requests: 5 } }, { rate_limit: { per_seconds: 1 } }])
      assert.equal(rateLimitOf(config as Record<string, unknown> | null), undefined);
    for (const [requests, per_seconds] of [
      [0, 1],
      [-1, 1],
      [1.5, 1],
      ['5', 1],
      [5, 0],
      [5, -1],
      [5, '1'],
      [5, Number.NaN],
    ]) {
      assert.equal(rateLimitOf({ rate_limit: { requests, per_seconds } }), undefined, `${requests}/${per_seconds}`);
    }
  });
});

describe('takeBudget', () => {
  it('does not wait within the budget, and counts each call', async () => {
    let t = EPOCH;
    const counter = limiterCounter(memoryLimiter(() => t));
    const limit = { requests: 2, perSeconds: 1 };
    assert.equal(await takeBudget(counter, 'c1', limit, () => t), 0);
    assert.equal(await takeBudget(counter, 'c1', limit, () => t), 0);
    // Another connector has its own budget; the next window a new one.
    assert.equal(await takeBudget(counter, 'c2', limit, () => t), 0);
    t += 1000;
    assert.equal(await takeBudget(counter, 'c1', limit, () => t), 0);
    assert.equal(await takeBudget(counter, 'c1', limit, () => t), 0);
  });

  it('gives up with an error only after waiting longer than maxWaitMs', async () => {
    const limit = { requests: 1, perSeconds: 1 };
    const clock = budgetClock(1000, 2);
    let hits = 0;
    const full: WindowCounter = {
      async hit(_key, _windowMs, now) {
        hits++;
        clock.passWindow(now);
        return limit.requests + 1;
      },
      peek: async () => limit.requests + 1,
    };
    await assert.rejects(takeBudget(full, 'c', limit, clock.now, 5000), { message: "The connector's rate limit kept the call waiting for more than 5 s" });
    // It tried once a window until it had waited past 5 s.
    assert.equal(hits, 7);
  });
});

describe('the memory counter', () => {
  it('counts in windows aligned to the clock, of whole seconds', async () => {
    let t = EPOCH + 999;
    const counter = limiterCounter(memoryLimiter(() => t));
    assert.equal(await counter.hit('k', 1000, t), 1);
    assert.equal(await counter.hit('k', 1000, t), 2);
    assert.equal(await counter.hit('other', 1000, t), 1);
    t += 1;
    assert.equal(await counter.hit('k', 1000, t), 1);
    // 300 ms is counted in a window of a second, 1.5 s in one of two.
    t = EPOCH + 10_000;
    assert.equal(await counter.hit('short', 300, t), 1);
    t += 900;
    assert.equal(await counter.hit('short', 300, t), 2);
    t = EPOCH + 20_000;
    assert.equal(await counter.hit('long', 1500, t), 1);
    t += 1999;
    assert.equal(await counter.hit('long', 1500, t), 2);
    t += 1;
    assert.equal(await counter.hit('long', 1500, t), 1);
  });

  it('admits at most the budget in a window; the other calls wait', async () => {
    await spendsWithinBudget((clock) => limiterCounter(memoryLimiter(clock.now)), { perSeconds: 1, marginMs: 5 });
  });

  it('reads a window without counting in it', async () => {
    await peeksWithoutCounting((now) => limiterCounter(memoryLimiter(now)));
  });
});

describe(`the database counter (${ENGINE})`, () => {
  let db: Db;
  let close: () => Promise<void>;
  before(async () => {
    if (process.env.DATABASE_URL) {
      const fresh = await freshPostgresDatabase();
      db = createDb({ databaseUrl: fresh.url, poolSize: 8 }).db;
      close = async () => {
        await db.destroy();
        await fresh.drop();
      };
    } else {
      db = createDb({ dataDir: 'memory', initialDump: await pgliteTemplate() }).db;
      close = () => db.destroy();
    }
  });
  after(() => close());

  it('counts in windows aligned to the clock', async () => {
    const counter = databaseCounter(db);
    const key = `connector:${randomUUID()}`;
    assert.equal(await counter.hit(key, 1000, EPOCH + 999), 1);
    assert.equal(await counter.hit(key, 1000, EPOCH), 2);
    assert.equal(await counter.hit(`${key}:other`, 1000, EPOCH + 500), 1);
    assert.equal(await counter.hit(key, 1000, EPOCH + 1000), 1);
    // Any length: 2.5 s windows start at multiples of 2.5 s.
    assert.equal(await counter.hit(key, 2500, EPOCH + 2500), 1);
    assert.equal(await counter.hit(key, 2500, EPOCH + 4999), 2);
    assert.equal(await counter.hit(key, 2500, EPOCH + 5000), 1);
  });

  it('reads a window without counting in it', async () => {
    await peeksWithoutCounting(() => databaseCounter(db));
  });

  it('admits at most the budget in a window; the other calls wait', async () => {
    await spendsWithinBudget(() => databaseCounter(db), { perSeconds: 1, marginMs: 5 });
    await spendsWithinBudget(() => databaseCounter(db), { perSeconds: 0.25, marginMs: 5 });
  });

  it('every thousandth call deletes the windows older than a day, and keeps the others', async () => {
    const counter = databaseCounter(db);
    const old = `connector:${randomUUID()}`;
    const recent = `connector:${randomUUID()}`;
    const busy = `connector:${randomUUID()}`;
    const now = EPOCH + 3 * 86_400_000;
    assert.equal(await counter.hit(old, 1000, now - 86_400_000 - 1000), 1);
    assert.equal(await counter.hit(recent, 1000, now - 86_400_000 + 1000), 1);
    for (let i = 3; i <= 1000; i++) await counter.hit(busy, 1000, now);
    assert.equal(await counter.hit(old, 1000, now - 86_400_000 - 1000), 1);
    assert.equal(await counter.hit(recent, 1000, now - 86_400_000 + 1000), 2);
    assert.equal(await counter.hit(busy, 1000, now), 999);
  });
});

describe('the Redis counter', { skip: process.env.REDIS_URL ? false : 'REDIS_URL is not set' }, () => {
  const clients: Redis[] = [];
  after(async () => {
    for (const r of clients) await r.quit().catch(() => r.disconnect());
  });
  const redis = () => {
    const r = new Redis(process.env.REDIS_URL!, { maxRetriesPerRequest: 2 });
    clients.push(r);
    return r;
  };

  it('reads a window without counting in it', async () => {
    // Its key expires in real time: the reads follow the hits well within the 1.9 s left.
    await peeksWithoutCounting((now) => limiterCounter(redisLimiter(redis(), now)));
  });

  it('admits at most the budget in a window across connections; the other calls wait', async () => {
    // Two limiters on two connections, as two processes would have; keys expire in real
    // time, so the clock stands 1.5 s before the end of each 2 s window.
    const a = redisLimiter(redis(), () => now());
    const b = redisLimiter(redis(), () => now());
    let now = () => 0;
    let turn = 0;
    await spendsWithinBudget(
      (clock) => {
        now = clock.now;
        const ca = limiterCounter(a);
        const cb = limiterCounter(b);
        return { hit: (key, windowMs, t) => (turn++ % 2 === 0 ? ca : cb).hit(key, windowMs, t), peek: (key, windowMs, t) => ca.peek(key, windowMs, t) };
      },
      { perSeconds: 2, marginMs: 1500 },
    );
  });
});
