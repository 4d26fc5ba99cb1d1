/**
 * Fixed-window counters: per process in memory, or shared through Redis when REDIS_URL is
 * set. Used for the per-account window of the API surfaces, the token endpoint's
 * per-address window (and later per-trigger webhook windows). Time comes from the clock
 * given (Deps.clock), so tests move it instead of waiting.
 *
 * Why not @fastify/rate-limit: its headers are the older X-RateLimit/draft-6 set and its
 * 429 body is its own; we need the RateLimit/RateLimit-Policy fields and our error
 * document, and the same counter must serve non-Fastify callers. The counter itself is
 * a dozen lines.
 */
import { Redis } from 'ioredis';
import type { Logger } from 'pino';

export interface WindowResult {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Seconds until the window resets. */
  resetSeconds: number;
}

/** Where the windows are counted right now, as /readyz reports it. */
export type LimiterState = 'per process' | 'shared' | 'per process (Redis unavailable)';

export interface Limiter {
  hit(key: string, max: number, windowSeconds: number): Promise<WindowResult>;
  /** The count of the window of `key` that holds the clock's now, without counting: 0 when nothing hit it. */
  peek(key: string, windowSeconds: number): Promise<number>;
  state(): LimiterState;
  close(): Promise<void>;
}

export function memoryLimiter(now: () => number): Limiter {
  const windows = new Map<string, { count: number; resetAt: number }>();
  let lastSweep = now();
  return {
    async hit(key, max, windowSeconds) {
      const t = now();
      // Drop expired windows now and then so idle keys do not accumulate.
      if (t - lastSweep > 60_000) {
        for (const [k, w] of windows) if (w.resetAt <= t) windows.delete(k);
        lastSweep = t;
      }
      let w = windows.get(key);
      if (!w || w.resetAt <= t) {
        // Windows align to the clock so every process (and Redis) agrees on the boundaries.
        const size = windowSeconds * 1000;
        w = { count: 0, resetAt: Math.floor(t / size) * size + size };
        windows.set(key, w);
      }
      w.count += 1;
      return result(w.count, max, Math.max(1, Math.ceil((w.resetAt - t) / 1000)));
    },
    async peek(key) {
      const w = windows.get(key);
      return w === undefined || w.resetAt <= now() ? 0 : w.count;
    },
    state: () => 'per process',
    async close() {
      windows.clear();
    },
  };
}

// INCR and set the expiry in one round trip, atomically.
const SCRIPT = `
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return {n, redis.call('PTTL', KEYS[1])}`;

export function redisLimiter(redis: Redis, now: () => number): Limiter {
  return {
    async hit(key, max, windowSeconds) {
      const size = windowSeconds * 1000;
      const t = now();
      const bucket = Math.floor(t / size);
      const ttl = bucket * size + size - t;
      const [count, pttl] = (await redis.eval(SCRIPT, 1, `tributary:rl:${key}:${bucket}`, String(ttl))) as [number, number];
      return result(count, max, Math.max(1, Math.ceil((pttl > 0 ? pttl : ttl) / 1000)));
    },
    async peek(key, windowSeconds) {
      const bucket = Math.floor(now() / (windowSeconds * 1000));
      return Number((await redis.get(`tributary:rl:${key}:${bucket}`)) ?? 0);
    },
    state: () => 'shared',
    async close() {
      // quit() waits for a reply that a gone server never sends.
      if (redis.status === 'ready') await redis.quit().catch(() => undefined);
      redis.disconnect();
    },
  };
}

/**
 * Shared windows in Redis, with the in-process counter while Redis does not answer: a
 * command fails at once when Redis is not connected (no offline queue) and after
 * `timeoutMs` when it is slow, and that request is counted in this process instead. So an
 * outage neither fails nor stalls requests; they stay limited, per process. The log says
 * so once per outage, and once when Redis answers again.
 */
export async function resilientRedisLimiter(redisUrl: string, opts: { timeoutMs: number; log: Logger; now: () => number }): Promise<Limiter> {
  const redis = new Redis(redisUrl, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout: opts.timeoutMs,
    connectTimeout: Math.max(opts.timeoutMs, 1000),
    // Reconnect for ever, at most every 2 s: the windows are shared again as soon as it is back.
    retryStrategy: (times) => Math.min(times * 100, 2000),
  });
  const shared = redisLimiter(redis, opts.now);
  const local = memoryLimiter(opts.now);
  let unavailable = false;
  const lost = (err: unknown) => {
    if (unavailable) return;
    unavailable = true;
    opts.log.warn(
      { err: { message: err instanceof Error ? err.message : String(err) } },
      'Redis unavailable: rate windows are counted per process until it answers',
    );
  };
  // Without a listener ioredis prints every failed reconnect.
  redis.on('error', lost);
  // The first requests would otherwise find no connection yet and count in the process.
  await new Promise<void>((resolve) => {
    const done = () => {
      clearTimeout(timer);
      redis.off('ready', done);
      resolve();
    };
    const timer = setTimeout(done, Math.max(opts.timeoutMs, 1000));
    redis.once('ready', done);
  });
  return {
    async hit(key, max, windowSeconds) {
      let r: WindowResult;
      try {
        r = await shared.hit(key, max, windowSeconds);
      } catch (err) {
        lost(err);
        return local.hit(key, max, windowSeconds);
      }
      if (unavailable) {
        unavailable = false;
        opts.log.info('Redis answers again: rate windows are shared again');
      }
      return r;
    },
    async peek(key, windowSeconds) {
      // Where hit would count now: Redis, or this process while Redis does not answer.
      try {
        return await shared.peek(key, windowSeconds);
      } catch (err) {
        lost(err);
        return local.peek(key, windowSeconds);
      }
    },
    state: () => (unavailable ? 'per process (Redis unavailable)' : 'shared'),
    async close() {
      await shared.close();
      await local.close();
    },
  };
}

function result(count: number, max: number, resetSeconds: number): WindowResult {
  return { allowed: count <= max, limit: max, remaining: Math.max(0, max - count), resetSeconds };
}
