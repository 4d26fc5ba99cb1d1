/**
 * A connector's rate budget (src/connectors/rate.ts): a sliding window of clock-aligned
 * buckets, with each counter (in memory, in the database, in Redis when REDIS_URL is set).
 * For any calls, the times takeBudget lets them go hold at most `requests` in any span of
 * per_seconds plus the margin, a call is refused only when the range really holds
 * `requests` calls (so a burst up to the budget goes at once, whatever per_seconds), and
 * a refused call waits instead of failing.
 *
 * Time is virtual: the callers' clock and sleeps are the test's, and it moves on only when
 * every caller waits, so nothing here depends on the machine's speed.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { Redis } from 'ioredis';
import { createDb, type Db } from '../../src/db/connect.ts';
import { memoryLimiter, redisLimiter } from '../../src/limiter.ts';
import {
  databaseCounter,
  limiterCounter,
  marginMs,
  rangeOf,
  rateLimitOf,
  rateUse,
  takeBudget,
  type RateLimit,
  type WindowCounter,
} from '../../src/connectors/rate.ts';
import { ENGINE, freshPostgresDatabase } from '../helpers/app.ts';
import { pgliteTemplate } from '../helpers/databases.ts';

/** A fixed start, so buckets are the same on every run. */
const EPOCH = 1_800_000_000_000;

/** A clock and sleeps of the test's: time jumps to the next wake-up once every caller is waiting or done. */
function virtualTime(start: number) {
  let t = start;
  let seq = 0;
  let busy = 0;
  const timers: { at: number; seq: number; wake: () => void }[] = [];
  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      busy--;
      timers.push({ at: t + ms, seq: seq++, wake: resolve });
    });
  return {
    now: () => t,
    sleep,
    /** Runs `work` as a caller from `offsetMs` on. */
    spawn<T>(offsetMs: number, work: () => Promise<T>): Promise<T> {
      busy++;
      return (async () => {
        try {
          await sleep(offsetMs);
          return await work();
        } finally {
          busy--;
        }
      })();
    },
    async run(): Promise<void> {
      for (;;) {
        while (busy > 0) await new Promise((resolve) => setImmediate(resolve));
        if (timers.length === 0) return;
        timers.sort((a, b) => a.at - b.at || a.seq - b.seq);
        const next = timers.shift()!;
        t = Math.max(t, next.at);
        busy++;
        next.wake();
      }
    },
  };
}

/** The counter as takeBudget sees it, recording when it let a call go and when it refused one. */
function watched(counter: WindowCounter) {
  const granted: number[] = [];
  const refused: number[] = [];
  return {
    granted,
    refused,
    counter: {
      async slide(key, range, now, max) {
        const r = await counter.slide(key, range, now, max);
        if (max > 0) (r.taken ? granted : refused).push(now);
        return r;
      },
    } satisfies WindowCounter,
  };
}

/**
 * Callers at `offsets` (ms after EPOCH) each take the budget once. Every one goes; any
 * `requests` + 1 send times are more than per_seconds + the margin apart; and a refusal at
 * t means `requests` calls went within the range counted then (per_seconds, the margin and
 * one bucket before t).
 */
async function holdsOverAnySpan(counter: WindowCounter, limit: RateLimit, offsets: number[]): Promise<void> {
  const vt = virtualTime(EPOCH);
  const w = watched(counter);
  const id = randomUUID();
  const calls = offsets.map((offset) => vt.spawn(offset, () => takeBudget(w.counter, id, limit, vt.now, Number.POSITIVE_INFINITY, vt.sleep)));
  await vt.run();
  await Promise.all(calls);
  const sends = [...w.granted].sort((a, b) => a - b);
  assert.equal(sends.length, offsets.length);
  const span = limit.perSeconds * 1000 + marginMs(limit);
  for (let i = 0; i + limit.requests < sends.length; i++)
    assert.ok(sends[i + limit.requests]! - sends[i]! > span, `sends ${i} and ${i + limit.requests} of ${JSON.stringify(sends)}`);
  const { bucketMs } = rangeOf(limit, EPOCH);
  for (const t of w.refused) {
    const inRange = sends.filter((s) => s >= t - span - bucketMs && s <= t).length;
    assert.ok(inRange >= limit.requests, `refused at ${t} with ${inRange} sent in its range: ${JSON.stringify(sends)}`);
  }
}

const budgets = fc.record({
  requests: fc.integer({ min: 1, max: 6 }),
  perSeconds: fc.oneof(fc.integer({ min: 1, max: 5 }), fc.constantFrom(60, 3600, 86_400)),
});

/** Random budgets and callers: some at once, most spread over a few spans. */
const attempts = (maxCalls: number) =>
  budgets.chain((limit) =>
    fc.tuple(
      fc.constant(limit),
      fc.array(fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 3 * limit.perSeconds * 1000 })), { minLength: 1, maxLength: maxCalls }),
    ),
  );

async function holdsForAnyCalls(counter: () => WindowCounter, runs: number, maxCalls: number): Promise<void> {
  await fc.assert(
    fc.asyncProperty(attempts(maxCalls), ([limit, offsets]) => holdsOverAnySpan(counter(), limit, offsets)),
    { numRuns: runs },
  );
}

/** Four calls just before a second ends and four just after: a fixed window let all eight go within 20 ms. */
async function holdsAcrossABoundary(counter: WindowCounter): Promise<void> {
  const vt = virtualTime(EPOCH);
  const id = randomUUID();
  const limit = { requests: 4, perSeconds: 1 };
  const take = () => takeBudget(counter, id, limit, vt.now, Number.POSITIVE_INFINITY, vt.sleep);
  const waits = [...Array.from({ length: 4 }, () => vt.spawn(990, take)), ...Array.from({ length: 4 }, () => vt.spawn(1010, take))];
  await vt.run();
  const ms = await Promise.all(waits);
  assert.deepEqual(ms.slice(0, 4), [0, 0, 0, 0]);
  // The first four sit in the bucket from 900 ms, which leaves the range 1.1 s + 100 ms after it: at 2100 ms.
  for (const m of ms.slice(4)) assert.ok(m >= 2100 - 1010 && m < 2100 - 1010 + 15, `waited ${m}`);
}

/** A budget's use as rateUse reads it: the calls in the range takeBudget counts, then 0 once they left it. */
async function peeksWithoutCounting(counter: WindowCounter): Promise<void> {
  const id = randomUUID();
  const limit = { requests: 5, perSeconds: 2 };
  let t = EPOCH + 100;
  assert.deepEqual(await rateUse(counter, id, limit, t), { used: 0, remaining: 5, resetsAt: new Date(t) });
  for (let i = 0; i < 3; i++) assert.equal(await takeBudget(counter, id, limit, () => t), 0);
  // Buckets of 200 ms: the one from EPOCH leaves the range 2 s + 200 ms (margin) + 200 ms (bucket) after it.
  assert.deepEqual(await rateUse(counter, id, limit, t), { used: 3, remaining: 2, resetsAt: new Date(EPOCH + 2400) });
  assert.equal((await rateUse(counter, id, limit, t)).used, 3);
  t = EPOCH + 2399;
  assert.equal((await rateUse(counter, id, limit, t)).used, 3);
  t = EPOCH + 2400;
  assert.deepEqual(await rateUse(counter, id, limit, t), { used: 0, remaining: 5, resetsAt: new Date(t) });
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

describe('the range counted', () => {
  it('is per_seconds cut into ten buckets aligned to the clock, plus a margin of min(250 ms, per_seconds / 10)', () => {
    assert.equal(marginMs({ requests: 4, perSeconds: 1 }), 100);
    assert.equal(marginMs({ requests: 4, perSeconds: 60 }), 250);
    assert.deepEqual(rangeOf({ requests: 4, perSeconds: 1 }, EPOCH + 1234), { bucketMs: 100, from: EPOCH + 100, keepMs: 1300 });
    assert.deepEqual(rangeOf({ requests: 10, perSeconds: 86_400 }, EPOCH), {
      bucketMs: 8_640_000,
      from: Math.floor((EPOCH - 86_400_250) / 8_640_000) * 8_640_000,
      keepMs: 86_400_250 + 2 * 8_640_000,
    });
  });
});

describe('takeBudget', () => {
  it("lets a budget's first calls go at once, even a day's, each connector on its own", async () => {
    const t = EPOCH;
    const counter = limiterCounter(memoryLimiter(() => t));
    const day = { requests: 10, perSeconds: 86_400 };
    for (let i = 0; i < 10; i++) assert.equal(await takeBudget(counter, 'c1', day, () => t), 0);
    assert.equal(await takeBudget(counter, 'c2', day, () => t), 0);
    // The eleventh would wait a day: past the wait limit, it fails at once.
    await assert.rejects(
      takeBudget(counter, 'c1', day, () => t),
      { message: "The connector's rate limit would keep the call waiting for more than 600 s" },
    );
    assert.equal((await rateUse(counter, 'c1', day, t)).used, 10);
  });

  it('over the budget, waits until the oldest call leaves the range, then goes', async () => {
    const vt = virtualTime(EPOCH);
    const counter = limiterCounter(memoryLimiter(vt.now));
    const limit = { requests: 2, perSeconds: 1 };
    const take = () => takeBudget(counter, 'c', limit, vt.now, 5000, vt.sleep);
    const calls = [vt.spawn(50, take), vt.spawn(60, take), vt.spawn(500, take)];
    await vt.run();
    const [a, b, c] = await Promise.all(calls);
    assert.deepEqual([a, b], [0, 0]);
    // Bucket 0-100 ms leaves at 100 + 1000 + 100 ms; from 500 ms that is 700 ms, plus up to 15 ms of spread.
    assert.ok(c! >= 700 && c! < 715, `waited ${c}`);
  });

  it('holds across a window boundary where a fixed window let twice the budget go', async () => {
    await holdsAcrossABoundary(limiterCounter(memoryLimiter(() => 0)));
  });

  it('fails at once when the budget frees up only past maxWaitMs', async () => {
    let tries = 0;
    const full: WindowCounter = {
      async slide(_key, _range, now) {
        tries++;
        return { taken: false, used: 1, oldest: Math.floor(now / 100) * 100 };
      },
    };
    await assert.rejects(
      takeBudget(full, 'c', { requests: 1, perSeconds: 10 }, () => EPOCH, 5000),
      {
        message: "The connector's rate limit would keep the call waiting for more than 5 s",
      },
    );
    assert.equal(tries, 1);
  });
});

describe('the memory counter', () => {
  it('holds any budget over any span of per_seconds, for any calls (property)', async () => {
    await holdsForAnyCalls(() => limiterCounter(memoryLimiter(() => 0)), 200, 40);
  });

  it('reads the range without counting in it', async () => {
    await peeksWithoutCounting(limiterCounter(memoryLimiter(() => 0)));
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

  it('holds any budget over any span of per_seconds, for any calls, concurrent ones included (property)', async () => {
    await holdsForAnyCalls(() => databaseCounter(db), 25, 15);
  });

  it('holds across a window boundary where a fixed window let twice the budget go', async () => {
    await holdsAcrossABoundary(databaseCounter(db));
  });

  it('reads the range without counting in it', async () => {
    await peeksWithoutCounting(databaseCounter(db));
  });

  it("drops a key's buckets once they leave its range, and every thousandth call those of idle keys two days old", async () => {
    const counter = databaseCounter(db);
    const rows = async (key: string) =>
      (await db.selectFrom('rate_windows').select('window_start').where('key', '=', key).execute()).map((r) => Number(r.window_start));
    const range = (now: number) => ({ bucketMs: 1000, from: now - 10_000, keepMs: 12_000 });
    const now = EPOCH + 3 * 86_400_000;
    const old = `connector:${randomUUID()}`;
    const recent = `connector:${randomUUID()}`;
    const busy = `connector:${randomUUID()}`;
    assert.equal((await counter.slide(old, range(now - 2 * 86_400_000 - 1000), now - 2 * 86_400_000 - 1000, 5)).taken, true);
    assert.equal((await counter.slide(recent, range(now - 86_400_000), now - 86_400_000, 5)).taken, true);
    await counter.slide(busy, range(now - 20_000), now - 20_000, 5);
    assert.equal((await counter.slide(busy, range(now), now, 5)).used, 1);
    assert.deepEqual(await rows(busy), [now]);
    for (let i = 3; i <= 1000; i++) await counter.slide(busy, range(now), now, Number.MAX_SAFE_INTEGER);
    assert.deepEqual(await rows(old), []);
    assert.equal((await rows(recent)).length, 1);
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
  /** Two limiters on two connections, as two processes would have, taking turns. */
  const twoProcesses = (): WindowCounter => {
    const a = limiterCounter(redisLimiter(redis(), () => 0));
    const b = limiterCounter(redisLimiter(redis(), () => 0));
    let turn = 0;
    return { slide: (key, range, now, max) => (turn++ % 2 === 0 ? a : b).slide(key, range, now, max) };
  };
  const shared = twoProcesses();

  it('holds any budget over any span of per_seconds across connections, for any calls (property)', async () => {
    await holdsForAnyCalls(() => shared, 25, 15);
  });

  it('holds across a window boundary where a fixed window let twice the budget go', async () => {
    await holdsAcrossABoundary(shared);
  });

  it('reads the range without counting in it', async () => {
    await peeksWithoutCounting(shared);
  });
});
