/**
 * A connector's config.rate_limit ({requests, per_seconds}) across every worker and
 * process: counted in Redis when REDIS_URL is set, in the database on PostgreSQL without
 * Redis, in memory on PGlite (one process). Windows are fixed and aligned to the clock, so
 * every process agrees on them. A call over the budget waits for the next window; it does
 * not fail.
 */
import type { Db } from '../db/connect.ts';
import type { Limiter } from '../limiter.ts';
import { isObject } from '../json.ts';
import { deleteOldWindows, hitWindow, readWindow } from './connectors.sql.ts';

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

export interface WindowCounter {
  /** Counts one call in the window containing `now`; returns the count after it. */
  hit(key: string, windowMs: number, now: number): Promise<number>;
  /** The count of the window containing `now`, without counting. */
  peek(key: string, windowMs: number, now: number): Promise<number>;
}

/** The window key of a connector's budget: takeBudget counts in it, rateUse reads it. */
const budgetKey = (connectorId: string) => `connector:${connectorId}`;

export function databaseCounter(db: Db): WindowCounter {
  let hits = 0;
  return {
    async hit(key, windowMs, now) {
      const start = Math.floor(now / windowMs) * windowMs;
      // Now and then, windows of the last day or older go.
      if (++hits % 1000 === 0) await deleteOldWindows(db, now - 86_400_000).catch(() => undefined);
      return hitWindow(db, key, start);
    },
    peek: (key, windowMs, now) => readWindow(db, key, Math.floor(now / windowMs) * windowMs),
  };
}

/** Redis or memory, through the service's limiter (its windows are whole seconds). */
export function limiterCounter(limiter: Limiter): WindowCounter {
  return {
    async hit(key, windowMs) {
      const r = await limiter.hit(key, Number.MAX_SAFE_INTEGER, Math.max(1, Math.round(windowMs / 1000)));
      return Number.MAX_SAFE_INTEGER - r.remaining;
    },
    peek: (key, windowMs) => limiter.peek(key, Math.max(1, Math.round(windowMs / 1000))),
  };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits until the call fits the budget, then counts it. Returns how long it waited (ms). */
export async function takeBudget(counter: WindowCounter, connectorId: string, limit: RateLimit, clock: () => number, maxWaitMs = 10 * 60_000): Promise<number> {
  const windowMs = limit.perSeconds * 1000;
  const started = clock();
  for (;;) {
    const now = clock();
    const count = await counter.hit(budgetKey(connectorId), windowMs, now);
    if (count <= limit.requests) return now - started;
    if (now - started > maxWaitMs) throw new Error(`The connector's rate limit kept the call waiting for more than ${Math.round(maxWaitMs / 1000)} s`);
    // Until the next window, plus a little spread so waiting workers do not all hit at once.
    const next = Math.floor(now / windowMs) * windowMs + windowMs;
    await sleep(next - now + Math.floor(Math.random() * 15));
  }
}

/** A budget's use in the window that holds `now`: calls counted (those that waited included), what is left, and when it resets. */
export interface RateUse {
  used: number;
  remaining: number;
  resetsAt: Date;
}

/** Reads the window takeBudget counts the connector's calls in, where it counts them (Redis, the database or memory). */
export async function rateUse(counter: WindowCounter, connectorId: string, limit: RateLimit, now: number): Promise<RateUse> {
  const windowMs = limit.perSeconds * 1000;
  const used = await counter.peek(budgetKey(connectorId), windowMs, now);
  return { used, remaining: Math.max(0, limit.requests - used), resetsAt: new Date(Math.floor(now / windowMs) * windowMs + windowMs) };
}
