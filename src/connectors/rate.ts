/**
 * A connector's config.rate_limit ({requests, per_seconds}) across every worker and
 * process: counted in Redis when REDIS_URL is set, in the database on PostgreSQL without
 * Redis, in memory on PGlite (one process).
 *
 * A conservative sliding window of buckets: per_seconds is cut into BUCKETS buckets aligned
 * to the clock (so every process agrees on them), each call is counted in the bucket of the
 * time it is let go, and a call may go only while every bucket that meets [now - per_seconds
 * - margin, now] holds fewer than `requests` calls between them. So any span of per_seconds
 * (and of per_seconds + margin) holds at most `requests` send times: at the last call of a
 * span, every earlier one of it sits in a counted bucket. The price is at most one bucket
 * and the margin of budget left unused. A fixed window would let a call sent at its end
 * arrive beside the next window's calls, and up to twice the budget within one span.
 *
 * A call over the budget waits until the oldest counted call's bucket leaves the range, then
 * tries again; it does not fail unless that is more than the wait limit away.
 */
import { sql } from 'kysely';
import type { Db } from '../db/connect.ts';
import type { Limiter, SlideRange, SlideResult } from '../limiter.ts';
import { isObject } from '../json.ts';
import { ADVISORY_LOCK } from '../db/advisory-locks.ts';
import { deleteBucketsBefore, deleteOldWindows, hitWindow, readBuckets } from './connectors.sql.ts';

export interface RateLimit {
  requests: number;
  perSeconds: number;
}

/** The connector's budget, or undefined when it has none or it is malformed (saves check it). */
export function rateLimitOf(config: Record<string, unknown> | null): RateLimit | undefined {
  const r = config?.rate_limit;
  if (!isObject(r)) return undefined;
  const requests = r.requests;
  const perSeconds = r.per_seconds;
  if (typeof requests !== 'number' || typeof perSeconds !== 'number' || !Number.isInteger(requests) || requests < 1 || !(perSeconds > 0)) return undefined;
  return { requests, perSeconds };
}

/** How many buckets per_seconds is cut into: the budget left unused is at most one of them. */
export const BUCKETS = 10;

/**
 * Added to the span counted, for what moves a call between the service's check and the
 * provider's arrival (the event loop, the connection, the network): min(250 ms, per_seconds / 10).
 */
export const marginMs = (limit: RateLimit) => Math.min(250, (limit.perSeconds * 1000) / 10);

/** The buckets counted at `now` for a budget. */
export function rangeOf(limit: RateLimit, now: number): SlideRange {
  const bucketMs = Math.max(1, Math.round((limit.perSeconds * 1000) / BUCKETS));
  const spanMs = limit.perSeconds * 1000 + marginMs(limit);
  return { bucketMs, from: Math.floor((now - spanMs) / bucketMs) * bucketMs, keepMs: spanMs + 2 * bucketMs };
}

/** When a bucket starting at `start` leaves the range of a budget (so its calls stop counting). */
export function leavesAt(limit: RateLimit, start: number): number {
  const { bucketMs } = rangeOf(limit, start);
  return start + bucketMs + limit.perSeconds * 1000 + marginMs(limit);
}

export interface WindowCounter {
  /**
   * Counts one call at `now` if the buckets of `range` hold fewer than `max` calls, in one
   * atomic step; with `max` 0 only reads.
   */
  slide(key: string, range: SlideRange, now: number, max: number): Promise<SlideResult>;
}

/**
 * The counter's key of a connector's budget: takeBudget counts in it, rateUse reads it. The
 * bucket width is part of it, so a changed per_seconds starts a new count rather than
 * mixing buckets of two widths.
 */
const budgetKey = (connectorId: string, range: SlideRange) => `connector:${connectorId}:${range.bucketMs}`;

/** Budgets are at most a day (external_connectors' rules): rows two days old belong to no range. */
const SWEEP_AFTER_MS = 2 * 86_400_000;

export function databaseCounter(db: Db): WindowCounter {
  let takes = 0;
  return {
    async slide(key, range, now, max) {
      // Now and then, buckets of idle keys go.
      if (max > 0 && ++takes % 1000 === 0) await deleteOldWindows(db, now - SWEEP_AFTER_MS).catch(() => undefined);
      if (max <= 0) {
        const { used, oldest } = await readBuckets(db, key, range.from);
        return { taken: false, used, oldest };
      }
      // Short and without I/O but the database's: callers of one key queue on the lock, so
      // each reads the counts the one before it committed.
      return db.transaction().execute(async (trx) => {
        await sql`select pg_advisory_xact_lock(${ADVISORY_LOCK.rateKey}, hashtext(${key}))`.execute(trx);
        await deleteBucketsBefore(trx, key, range.from);
        const { used, oldest } = await readBuckets(trx, key, range.from);
        if (used >= max) return { taken: false, used, oldest };
        const start = Math.floor(now / range.bucketMs) * range.bucketMs;
        await hitWindow(trx, key, start);
        return { taken: true, used: used + 1, oldest: oldest === null || start < oldest ? start : oldest };
      });
    },
  };
}

/** Redis or memory, through the service's limiter. */
export function limiterCounter(limiter: Limiter): WindowCounter {
  return { slide: (key, range, now, max) => limiter.slide(key, range, now, max) };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Waits until the call fits the budget, then counts it. Returns how long it waited (ms).
 * When the budget frees up only after more than maxWaitMs from the first try, it fails.
 */
export async function takeBudget(
  counter: WindowCounter,
  connectorId: string,
  limit: RateLimit,
  clock: () => number,
  maxWaitMs = 10 * 60_000,
  wait: (ms: number) => Promise<unknown> = sleep,
): Promise<number> {
  const started = clock();
  for (;;) {
    const now = clock();
    const range = rangeOf(limit, now);
    const r = await counter.slide(budgetKey(connectorId, range), range, now, limit.requests);
    if (r.taken) return now - started;
    // A full range has a call in it; should it have gone meanwhile, try again at once.
    const freesAt = r.oldest === null ? now : leavesAt(limit, r.oldest);
    if (freesAt - started > maxWaitMs)
      throw new Error(`The connector's rate limit would keep the call waiting for more than ${Math.round(maxWaitMs / 1000)} s`);
    // Plus a little spread so waiting workers do not all try at once.
    await wait(Math.max(0, freesAt - now) + Math.floor(Math.random() * 15));
  }
}

/** A budget's use at `now`: the calls in the range takeBudget counts, what is left, and when the oldest of them stops counting. */
export interface RateUse {
  used: number;
  remaining: number;
  resetsAt: Date;
}

/** Reads the range takeBudget counts the connector's calls in, where it counts them (Redis, the database or memory). */
export async function rateUse(counter: WindowCounter, connectorId: string, limit: RateLimit, now: number): Promise<RateUse> {
  const range = rangeOf(limit, now);
  const { used, oldest } = await counter.slide(budgetKey(connectorId, range), range, now, 0);
  return { used, remaining: Math.max(0, limit.requests - used), resetsAt: new Date(oldest === null ? now : leavesAt(limit, oldest)) };
}
