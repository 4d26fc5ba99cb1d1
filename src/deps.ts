/**
 * What the request handlers and services need, as one plain object passed as their first
 * argument. Built once by main.ts (or by a test), torn down by closeDeps.
 */
import type { Logger } from 'pino';
import { connectorRuntime, type ConnectorRuntime } from './connectors/runtime.ts';
import type { Config } from './config.ts';
import { createDb, type Db } from './db/connect.ts';
import { migrate } from './db/migrate.ts';
import { instanceSecret } from './db/instance-secrets.sql.ts';
import { resolveAdminToken } from './admin-token.ts';
import { memoryLimiter, resilientRedisLimiter, type Limiter } from './limiter.ts';
import { createLogger } from './log.ts';

export interface Deps {
  config: Config;
  db: Db;
  engine: 'pglite' | 'postgres';
  log: Logger;
  limiter: Limiter;
  /** HMAC key of access tokens, shared by every process on one database. */
  signingKey: Buffer;
  /** AES-256-GCM key of connector secrets, shared likewise. */
  connectorKey: Buffer;
  /**
   * Milliseconds since the epoch: every reading of the time goes through it (token iat
   * and expiry, tokens_not_before, GraphQL's now, rate windows, the scheduler, the
   * sweep), so tests move time instead of waiting.
   */
  clock: Clock;
  /** The admin API's bearer token (compared in constant time). */
  adminToken: string;
  /** Set while shutting down: readiness fails and new work is refused. */
  draining: { value: boolean };
  /** Tells this process's worker that runs were queued, so it claims them at once. */
  queueSignal: QueueSignal;
  /** Outbound calls through connectors: one HTTP pool, token cache and rate counter per process. */
  connectors: ConnectorRuntime;
}

export interface QueueSignal {
  wake(): void;
  /** Returns the unsubscribe function. */
  subscribe(listener: () => void): () => void;
}

export function queueSignal(): QueueSignal {
  const listeners = new Set<() => void>();
  return {
    wake: () => {
      for (const l of listeners) l();
    },
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
}

export type Clock = () => number;

/** Unix seconds of a clock reading, as token claims count time. */
export function epochSeconds(clock: Clock): number {
  return Math.floor(clock() / 1000);
}

export async function createDeps(config: Config, opts: { log?: Logger; dataDir?: string; initialDump?: Blob; clock?: Clock } = {}): Promise<Deps> {
  // Before the logger: its redaction needs the token, which need not carry our prefix.
  const adminToken = resolveAdminToken(config.adminToken, config.dataDir);
  const log = opts.log ?? createLogger({ ...config, adminToken });
  // Read at each call, so that a test's mocked Date is seen too.
  const clock = opts.clock ?? (() => Date.now());
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
    const connectorKey = await instanceSecret(db, 'connector_encryption_key');
    const limiter = config.redisUrl ? await resilientRedisLimiter(config.redisUrl, { timeoutMs: config.redisTimeoutMs, log, now: clock }) : memoryLimiter(clock);
    const connectors = connectorRuntime({ db, engine, limiter, connectorKey, clock, config });
    return { config, db, engine, log, limiter, signingKey, connectorKey, adminToken, clock, draining: { value: false }, queueSignal: queueSignal(), connectors };
  } catch (err) {
    await db.destroy().catch(() => undefined);
    throw err;
  }
}

export async function closeDeps(deps: Deps): Promise<void> {
  await deps.connectors.close().catch(() => undefined);
  await deps.limiter.close();
  await deps.db.destroy();
}
