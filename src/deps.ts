/**
 * What the request handlers and services need, as one plain object passed as their first
 * argument. Built once by main.ts (or by a test), torn down by closeDeps.
 */
import type { Logger } from 'pino';
import type { Config } from './config.ts';
import { createDb, type Db } from './db/connect.ts';
import { migrate } from './db/migrate.ts';
import { instanceSecret } from './db/instance-secrets.sql.ts';
import { resolveAdminToken } from './admin/admin-auth.ts';
import { memoryLimiter, resilientRedisLimiter, type Limiter } from './http/rate-limit.ts';
import { createLogger } from './log.ts';

export interface Deps {
  config: Config;
  db: Db;
  engine: 'pglite' | 'postgres';
  log: Logger;
  limiter: Limiter;
  /** HMAC key of access tokens, shared by every process on one database. */
  signingKey: Buffer;
  /** Unix seconds; a function so tests can move time. */
  now: () => number;
  /** The admin API's bearer token (compared in constant time). */
  adminToken: string;
  /** Set while shutting down: readiness fails and new work is refused. */
  draining: { value: boolean };
}

export async function createDeps(config: Config, opts: { log?: Logger; dataDir?: string; initialDump?: Blob } = {}): Promise<Deps> {
  const log = opts.log ?? createLogger(config);
  const { db, engine } = createDb({
    databaseUrl: config.databaseUrl,
    dataDir: opts.dataDir ?? config.dataDir,
    initialDump: opts.initialDump,
    poolSize: config.databasePoolSize,
    connectTimeoutMs: config.databaseConnectTimeoutMs,
    onConnectionLost: (err) => log.warn({ err: { message: err.message, code: (err as { code?: unknown }).code } }, 'database connection lost'),
  });
  try {
    const applied = await migrate(db);
    if (applied.length > 0) log.info({ migrations: applied }, 'migrations applied');
    const signingKey = await instanceSecret(db, 'token_signing_key');
    const adminToken = resolveAdminToken(config.adminToken, config.dataDir);
    const limiter = config.redisUrl ? await resilientRedisLimiter(config.redisUrl, { timeoutMs: config.redisTimeoutMs, log }) : memoryLimiter();
    return { config, db, engine, log, limiter, signingKey, adminToken, now: () => Math.floor(Date.now() / 1000), draining: { value: false } };
  } catch (err) {
    await db.destroy().catch(() => undefined);
    throw err;
  }
}

export async function closeDeps(deps: Deps): Promise<void> {
  await deps.limiter.close();
  await deps.db.destroy();
}
