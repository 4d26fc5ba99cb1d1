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
  /**
   * A sliding window of clock-aligned buckets (connectors/rate.ts): counts one call in the
   * bucket of `now` if the buckets from `range.from` on hold fewer than `max`, in one atomic
   * step; with `max` 0 only reads. Buckets before `range.from` are dropped.
   */
  slide(key: string, range: SlideRange, now: number, max: number): Promise<SlideResult>;
  state(): LimiterState;
  close(): Promise<void>;
}

export function memoryLimiter(now: () => number): Limiter {
  const windows = new Map<string, { count: number; resetAt: number }>();
  const slides = memorySlides();
  let lastSweep = now();
  return {
    async slide(key, range, at, max) {
      return slides.slide(key, range, at, max);
    },
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
      slides.clear();
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
    async slide(key, range, at, max) {
      const start = bucketOf(at, range.bucketMs);
      const [taken, used, oldest] = (await redis.eval(
        SLIDE,
        1,
        `tributary:slide:${key}`,
        String(range.from),
        String(start),
        String(max),
        String(Math.ceil(range.keepMs)),
      )) as [number, number, string];
      return { taken: taken === 1, used, oldest: oldest === '' ? null : Number(oldest) };
    },
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
    async slide(key, range, at, max) {
      let r: SlideResult;
      try {
        r = await shared.slide(key, range, at, max);
      } catch (err) {
        lost(err);
        return local.slide(key, range, at, max);
      }
      if (unavailable) {
        unavailable = false;
        opts.log.info('Redis answers again: rate windows are shared again');
      }
      return r;
    },
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

/** The buckets a sliding window counts: of `bucketMs` each, those starting at `from` or later. */
export interface SlideRange {
  bucketMs: number;
  from: number;
  /** How long a bucket must be kept after its start (ms): the window's length and a bucket. */
  keepMs: number;
}

export interface SlideResult {
  /** Whether the call was counted (false when it would pass `max`, and when only reading). */
  taken: boolean;
  /** The calls counted in the range, this one included when taken. */
  used: number;
  /** The start of the oldest bucket of the range with a call, or null when none has one. */
  oldest: number | null;
}

const bucketOf = (now: number, bucketMs: number) => Math.floor(now / bucketMs) * bucketMs;

function memorySlides() {
  // key -> bucket start -> count, and when the key's newest bucket may go.
  const slides = new Map<string, { buckets: Map<number, number>; expiresAt: number }>();
  let lastSweep = 0;
  return {
    slide(key: string, range: SlideRange, now: number, max: number): SlideResult {
      if (now - lastSweep > 60_000) {
        for (const [k, s] of slides) if (s.expiresAt <= now) slides.delete(k);
        lastSweep = now;
      }
      let s = slides.get(key);
      let used = 0;
      let oldest: number | null = null;
      if (s)
        for (const [start, count] of s.buckets) {
          if (start < range.from) s.buckets.delete(start);
          else {
            used += count;
            if (oldest === null || start < oldest) oldest = start;
          }
        }
      if (max <= 0 || used >= max) return { taken: false, used, oldest };
      const start = bucketOf(now, range.bucketMs);
      if (!s) slides.set(key, (s = { buckets: new Map(), expiresAt: 0 }));
      s.buckets.set(start, (s.buckets.get(start) ?? 0) + 1);
      s.expiresAt = Math.max(s.expiresAt, start + range.keepMs);
      return { taken: true, used: used + 1, oldest: oldest === null || start < oldest ? start : oldest };
    },
    clear: () => slides.clear(),
  };
}

// A sliding window in one hash per key (field: a bucket's start, value: its count), read,
// pruned and counted in one step. Starts travel as strings: Lua's numbers are doubles.
const SLIDE = `
local from = tonumber(ARGV[1])
local max = tonumber(ARGV[3])
local all = redis.call('HGETALL', KEYS[1])
local used = 0
local oldest = nil
local oldestField = ''
for i = 1, #all, 2 do
  local start = tonumber(all[i])
  if start < from then
    redis.call('HDEL', KEYS[1], all[i])
  else
    used = used + tonumber(all[i + 1])
    if oldest == nil or start < oldest then
      oldest = start
      oldestField = all[i]
    end
  end
end
if max <= 0 or used >= max then return {0, used, oldestField} end
redis.call('HINCRBY', KEYS[1], ARGV[2], 1)
redis.call('PEXPIRE', KEYS[1], ARGV[4])
if oldest == nil or tonumber(ARGV[2]) < oldest then oldestField = ARGV[2] end
return {1, used + 1, oldestField}`;

function result(count: number, max: number, resetSeconds: number): WindowResult {
  return { allowed: count <= max, limit: max, remaining: Math.max(0, max - count), resetSeconds };
}
