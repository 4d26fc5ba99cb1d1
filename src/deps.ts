/**
 * What the request handlers and services need, as one plain object passed as their first
 * argument. Built once by main.ts (or by a test), torn down by closeDeps.
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { connectorRuntime, type ConnectorRuntime } from './connectors/runtime.ts';
import type { Config } from './config.ts';
import { createDb, type Db } from './db/connect.ts';
import { migrate } from './db/migrate.ts';
import { instanceSecret } from './db/instance-secrets.sql.ts';
import { resolveAdminToken } from './admin-token.ts';
import { memoryLimiter, resilientRedisLimiter, type Limiter } from './limiter.ts';
import { createLogger } from './log.ts';
import { createExpressionPool, type ExpressionPool } from './expressions/expression-pool.ts';
import { queueSignal, type QueueSignal } from './runs/wake.ts';
import { specImporter, type SpecImporter } from './openapi/import-pool.ts';
import { createMetrics, type Metrics } from './metrics.ts';
import { queueGauges } from './runs/queue-gauges.sql.ts';
import { waitingRuns, type WaitingRuns } from './quotas/quotas.ts';
import { FLUSH_TIMEOUT_MS, NO_TRACING, type Tracing } from './tracing.ts';
import { inboundStatus, type InboundStatus } from './connectors/inbound-status.ts';

export interface Deps {
  config: Config;
  db: Db;
  /** The same database for bulk writes (imports): on PGlite its statements let requests' go first. */
  bulkDb: Db;
  engine: 'pglite' | 'postgres';
  log: Logger;
  limiter: Limiter;
  /**
   * HMAC key of access tokens, shared by every process on one database. Until the database
   * answers it is random bytes no one holds, read into place by readyDeps.
   */
  signingKey: Buffer;
  /** AES-256-GCM key of connector secrets, shared likewise, and likewise read into place. */
  connectorKey: Buffer;
  /**
   * Milliseconds since the epoch: every reading of the time goes through it (token iat
   * and expiry, tokens_not_before, GraphQL's now, rate windows, the scheduler, the
   * sweep, the updated_at a write sets), so tests move time instead of waiting.
   */
  clock: Clock;
  /** The admin API's bearer token (compared in constant time). */
  adminToken: string;
  /** Set while shutting down: readiness fails and new work is refused. */
  draining: { value: boolean };
  /** Set once the database answered, is migrated and the keys are read: until then every request but health is 503. */
  ready: { value: boolean };
  /**
   * The relay's URL as providers reach it: RELAY_PUBLIC_URL, else the relay listening inside
   * this process (serve with RELAY_PORT) once it listens, with whether it listens on every
   * address (then the console names it by the host the browser used). Undefined: none known.
   * The console and a workflow save's meta.relay_url show it.
   */
  relay: { url: string | undefined; everyAddress: boolean };
  /** performance.now() when a query last succeeded (0: none yet): readiness without queueing behind a busy pool. */
  databaseAnswered: () => number;
  /** Connections in use and callers waiting for one. */
  databasePool: () => { inUse: number; waiting: number };
  /** Tells this process's worker that runs were queued, so it claims them at once. */
  queueSignal: QueueSignal;
  /** Outbound calls through connectors: one HTTP pool, token cache and rate counter per process. */
  connectors: ConnectorRuntime;
  /** Child processes that evaluate workflow expressions, off this process's event loop and heap. */
  expressions: ExpressionPool;
  /** The test runs' own expression children (config.testRuns): a test run never waits for, nor delays, a run's expressions. */
  testExpressions: ExpressionPool;
  /** Test runs in progress in this process, by workspace (bounded by config.testRuns.concurrency each; empty entries are removed). */
  testRunsInProgress: Map<string, number>;
  /** Reads uploaded OpenAPI documents in child processes, within their time and heap budgets. */
  specImporter: SpecImporter;
  /** This process's counters and gauges, on its own registry (src/metrics.ts). */
  metrics: Metrics;
  /** This process's traces (src/tracing.ts): NO_TRACING unless an OTLP endpoint is configured. */
  tracing: Tracing;
  /** Each workspace's waiting runs as the webhook and schedule paths check them (QUOTA_WAITING_RUNS), read at most once a second. */
  waitingRuns: WaitingRuns;
  /** Inbound connectors' status from their deliveries: failures counted in memory, the row written only on a change, at most once a second each. */
  inboundStatus: InboundStatus;
}

export type Clock = () => number;

/** Unix seconds of a clock reading, as token claims count time. */
export function epochSeconds(clock: Clock): number {
  return Math.floor(clock() / 1000);
}

/**
 * The process's dependencies, without a word to the database (the PostgreSQL pool connects
 * on first use), so that a process can listen and say "not ready" while it waits for one.
 */
export async function openDeps(config: Config, opts: { log?: Logger; dataDir?: string; initialDump?: Blob; clock?: Clock } = {}): Promise<Deps> {
  // Before the logger: its redaction needs the token, which need not carry our prefix.
  const adminToken = resolveAdminToken(config.adminToken, config.dataDir);
  const log = opts.log ?? createLogger({ ...config, adminToken });
  // Read at each call, so that a test's mocked Date is seen too.
  const clock = opts.clock ?? (() => Date.now());
  const { db, bulkDb, engine, poolStats, lastAnswer } = createDb({
    databaseUrl: config.databaseUrl,
    dataDir: opts.dataDir ?? config.dataDir,
    initialDump: opts.initialDump,
    poolSize: config.databasePoolSize,
    connectTimeoutMs: config.databaseConnectTimeoutMs,
    onConnectionLost: (err) => log.warn({ err: { message: err.message, code: (err as { code?: unknown }).code } }, 'database connection lost'),
  });
  try {
    // Filled in place by readyDeps: the routes and the connector runtime keep these very buffers.
    const signingKey = randomBytes(32);
    const connectorKey = randomBytes(32);
    const limiter = config.redisUrl
      ? await resilientRedisLimiter(config.redisUrl, { timeoutMs: config.redisTimeoutMs, log, now: clock })
      : memoryLimiter(clock);
    const metrics = createMetrics({
      queue: () => queueGauges(db, new Date(clock())),
      pool: poolStats,
      processMetrics: config.metricsPort !== undefined,
      tenantLabels: config.metricsTenantLabels,
    });
    const connectors = connectorRuntime({ db, engine, limiter, connectorKey, clock, config, metrics });
    const expressions = createExpressionPool({
      processes: config.expressionProcesses,
      memoryMb: config.expressionMemoryMb,
      timeoutMs: config.expressionTimeoutMs,
    });
    const testExpressions = createExpressionPool({
      processes: config.testRuns.expressionProcesses,
      memoryMb: config.expressionMemoryMb,
      timeoutMs: config.expressionTimeoutMs,
      priority: config.testRuns.expressionPriority,
    });
    const specs = specImporter(config.apiSpecImport);
    // Loaded only when asked for: without an endpoint no module of OpenTelemetry is read.
    const tracing = config.tracing ? (await import('./tracing-otel.ts')).openTracing(config.tracing, log, FLUSH_TIMEOUT_MS) : NO_TRACING;
    return {
      config,
      db,
      bulkDb,
      engine,
      log,
      limiter,
      signingKey,
      connectorKey,
      adminToken,
      clock,
      draining: { value: false },
      ready: { value: false },
      relay: { url: config.relay.publicUrl, everyAddress: false },
      databaseAnswered: lastAnswer,
      databasePool: poolStats,
      queueSignal: queueSignal(),
      connectors,
      expressions,
      testExpressions,
      testRunsInProgress: new Map(),
      specImporter: specs,
      metrics,
      tracing,
      waitingRuns: waitingRuns(db, clock, config.quotas.waitingRuns),
      inboundStatus: inboundStatus(db, clock, log),
    };
  } catch (err) {
    await db.destroy().catch(() => undefined);
    throw err;
  }
}

/** Migrates the database and reads the installation's keys into place. Throws what the database threw. */
export async function readyDeps(deps: Deps): Promise<void> {
  const applied = await migrate(deps.db);
  if (applied.length > 0) deps.log.info({ migrations: applied }, 'migrations applied');
  readInto(deps.signingKey, await instanceSecret(deps.db, 'token_signing_key'));
  readInto(deps.connectorKey, await instanceSecret(deps.db, 'connector_encryption_key'));
}

function readInto(key: Buffer, stored: Buffer): void {
  if (stored.length !== key.length) throw new Error(`an installation key in instance_secrets has ${stored.length} bytes, not ${key.length}`);
  key.set(stored);
}

/** openDeps and readyDeps: the dependencies of a database that answers now (tests, the CLI). */
export async function createDeps(config: Config, opts: { log?: Logger; dataDir?: string; initialDump?: Blob; clock?: Clock } = {}): Promise<Deps> {
  const deps = await openDeps(config, opts);
  try {
    await readyDeps(deps);
  } catch (err) {
    await closeDeps(deps);
    throw err;
  }
  deps.ready.value = true;
  return deps;
}

export async function closeDeps(deps: Deps): Promise<void> {
  // First: the spans of the last requests and runs are sent while the rest closes (bounded by FLUSH_TIMEOUT_MS).
  const flushed = deps.tracing.close();
  deps.inboundStatus.close();
  await deps.inboundStatus.settled();
  await deps.connectors.close().catch(() => undefined);
  await deps.expressions.close();
  await deps.testExpressions.close();
  await deps.specImporter.close();
  await deps.limiter.close();
  await deps.db.destroy();
  await flushed;
}
