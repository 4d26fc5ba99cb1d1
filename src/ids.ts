import { randomFillSync } from 'node:crypto';

// One id per request (the request id) makes a CSPRNG call per id costly; draw the random
// bits from a pool filled 512 ids at a time instead, as crypto.randomUUID does. Each
// 16-byte slice is handed out once, then the whole pool is refilled.
const POOL_BYTES = 16 * 512;
const pool = Buffer.alloc(POOL_BYTES);
let poolOffset = POOL_BYTES;

/**
 * UUIDv7 (RFC 9562): 48-bit unix-ms timestamp, then random bits; time-ordered, so indexes stay append-mostly.
 * The machine's time, not the deps clock: it only orders the index and is never read back as the time of anything.
 */
export function uuidv7(now: number = Date.now()): string {
  if (poolOffset === POOL_BYTES) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  const b = pool.subarray(poolOffset, poolOffset + 16);
  poolOffset += 16;
  b.writeUIntBE(now, 0, 6);
  b[6] = (b[6]! & 0x0f) | 0x70;
  b[8] = (b[8]! & 0x3f) | 0x80;
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function isUuid(s: unknown): s is string {
  return typeof s === 'string' && UUID_RE.test(s);
}
