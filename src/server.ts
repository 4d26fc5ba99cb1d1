/**
 * `tributary serve` and `tributary worker`: config -> deps -> HTTP (health answers at once)
 * -> wait for the database -> migrations, keys, first-start bootstrap -> ready (+ worker,
 * scheduler). The database need not be up first: until it answers, /readyz and every
 * request but /healthz get 503 with Retry-After, and the process retries with backoff.
 * SIGTERM/SIGINT: readiness turns 503, the listener stops accepting, in-flight requests
 * finish (bounded by SHUTDOWN_GRACE_MS; those still running then are logged and cut off),
 * then the pool closes.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { Config } from './config.ts';
import { buildApp } from './app.ts';
import { closeDeps, openDeps, readyDeps, type Deps } from './deps.ts';
import { isDatabaseUnavailable } from './errors.ts';
import { bootstrapIfEmpty } from './admin/bootstrap.ts';
import { startScheduler, type Scheduler } from './maintenance/scheduler.ts';
import { startWorker, type Worker } from './worker/worker.ts';
import { startSchedules, type ScheduleLoop } from './worker/schedules.ts';
import { requestsInFlight } from './http/connections.ts';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { listenMetrics, type MetricsListener } from './http/metrics-listener.ts';
import { createRelay, relayCredentials, type Relay } from './relay/relay.ts';

export interface Running {
  app: FastifyInstance;
  deps: Deps;
  url: string;
  /** The relay's listener, when RELAY_PORT is set (serve only). */
  relay?: { relay: Relay; url: string };
  /** The metrics' listener, when METRICS_PORT is set (serve and worker alike). */
  metrics?: MetricsListener;
  /** Settles once the database answered and the process serves (or stopped before that). */
  ready: Promise<void>;
  stop(): Promise<void>;
}

/** Waits between attempts to reach the database: doubling from the first, capped. */
export const DATABASE_RETRY = { firstMs: 500, maxMs: 10_000 } as const;

/**
 * Migrations, keys and the first-start bootstrap, retried while the database does not
 * answer. Concurrent starts on one PostgreSQL are safe: the migrator holds its advisory
 * lock (ADVISORY_LOCK.migrate) for the whole run, the bootstrap its own.
 */
async function whenDatabaseAnswers(deps: Deps, stopping: AbortSignal): Promise<void> {
  for (let attempt = 1, waitMs: number = DATABASE_RETRY.firstMs; ; attempt++, waitMs = Math.min(waitMs * 2, DATABASE_RETRY.maxMs)) {
    try {
      await readyDeps(deps);
      await bootstrapIfEmpty(deps);
      if (attempt > 1) deps.log.info({ attempts: attempt }, 'database answers');
      return;
    } catch (err) {
      if (!isDatabaseUnavailable(err)) throw err;
      const { message, code } = err as { message?: unknown; code?: unknown };
      deps.log.warn({ err: { message, code }, attempt, retry_in_ms: waitMs }, 'waiting for the database');
      await sleep(waitMs, undefined, { signal: stopping });
    }
  }
}

/**
 * Listens at once and gets ready in the background (`ready`). A database that refuses
 * for another reason than being unreachable (a wrong password, say) rejects `ready`.
 */
export async function start(config: Config, opts: { http: boolean; worker: boolean; log?: Logger }): Promise<Running> {
  const deps = await openDeps(config, opts.log ? { log: opts.log } : {});
  let app: FastifyInstance;
  let url = '';
  let relay: Running['relay'];
  let metrics: MetricsListener | undefined;
  try {
    app = await buildApp(deps);
    // First: a worker-only process is scraped too, and a scrape says whether the database answers.
    if (config.metricsPort !== undefined) {
      metrics = await listenMetrics(deps.metrics, config.metricsPort, config.metricsHost);
      deps.log.info({ url: metrics.url }, 'metrics listening');
    }
    if (opts.http) url = await app.listen({ port: config.port, host: config.host });
    if (opts.http && config.relay.port !== undefined) relay = await startRelay(config, deps, app);
  } catch (err) {
    await metrics?.close();
    await closeDeps(deps);
    throw err;
  }
  let scheduler: Scheduler | undefined;
  let worker: Worker | undefined;
  let schedules: ScheduleLoop | undefined;
  const stopping = new AbortController();
  const ready = whenDatabaseAnswers(deps, stopping.signal).then(
    () => {
      if (stopping.signal.aborted) return;
      deps.ready.value = true;
      scheduler = opts.worker ? startScheduler(deps) : undefined;
      worker = opts.worker ? startWorker(deps) : undefined;
      schedules = opts.worker ? startSchedules(deps) : undefined;
    },
    (err: unknown) => {
      if (!stopping.signal.aborted) throw err;
    },
  );
  let stopped: Promise<void> | undefined;
  const stop = () =>
    (stopped ??= (async () => {
      deps.draining.value = true;
      deps.log.info('draining');
      stopping.abort();
      await ready.catch(() => undefined);
      await scheduler?.stop();
      await schedules?.stop();
      // Responses from here on carry Connection: close (src/http/connections.ts) and idle
      // connections are closed, so no client sends a request on a connection about to go.
      const timer = setTimeout(() => {
        // The route pattern, never the URL: a query string may hold a secret.
        for (const request of requestsInFlight(app))
          request.log.warn({ method: request.method, route: request.routeOptions.url ?? 'no route' }, 'request cut off at shutdown');
        app.server.closeAllConnections?.();
      }, config.shutdownGraceMs);
      // The relay first: its deliveries in flight still need the service to answer them.
      // The worker and the HTTP server drain side by side, within the same grace period.
      await Promise.all([relay?.relay.stop().then(() => app.close()) ?? app.close(), worker?.stop(config.shutdownGraceMs)]);
      clearTimeout(timer);
      // Last but the pool: a drain can be watched to its end.
      await metrics?.close();
      await closeDeps(deps);
      deps.log.info('stopped');
    })());
  return { app, deps, url, ...(relay ? { relay } : {}), ...(metrics ? { metrics } : {}), ready, stop };
}

/**
 * The relay as a second listener of this process (RELAY_PORT): it forwards to this
 * process's own listener (unless RELAY_TARGET_URL says otherwise), as the bootstrap account
 * unless the relay's own account is configured.
 */
async function startRelay(config: Config, deps: Deps, app: FastifyInstance): Promise<Running['relay']> {
  const { port } = app.server.address() as AddressInfo;
  const own = ['0.0.0.0', '::'].includes(config.host) ? '127.0.0.1' : config.host.includes(':') ? `[${config.host}]` : config.host;
  const targetUrl = config.relay.targetUrl ?? `http://${own}:${port}`;
  const credentials = relayCredentials(config, path.join(config.dataDir, 'bootstrap.json'))!;
  const relay = await createRelay({ config, log: deps.log, targetUrl, credentials });
  try {
    const url = await relay.listen(config.relay.port!, config.relay.host);
    deps.log.info({ url, target: targetUrl }, 'relay listening');
    if (deps.relay.url === undefined) {
      deps.relay.url = url;
      deps.relay.everyAddress = ['0.0.0.0', '::'].includes(config.relay.host);
    }
    return { relay, url };
  } catch (err) {
    await relay.stop();
    await app.close();
    throw err;
  }
}

/** start(), resolved once ready: for callers that need the database at once (tests, the README run). */
export async function serve(config: Config, opts: { http: boolean; worker: boolean; log?: Logger }): Promise<Running> {
  const running = await start(config, opts);
  try {
    await running.ready;
  } catch (err) {
    await running.stop();
    throw err;
  }
  return running;
}

/** Runs until SIGTERM or SIGINT, then drains and resolves; rejects when getting ready failed. */
export async function runUntilSignal(running: Running): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const onSignal = (signal: string) => {
      running.deps.log.info({ signal }, 'signal received');
      process.off('SIGTERM', onSignal);
      process.off('SIGINT', onSignal);
      running.stop().then(resolve, (err) => {
        running.deps.log.error({ err }, 'shutdown failed');
        resolve();
      });
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
    running.ready.catch((err: unknown) => {
      process.off('SIGTERM', onSignal);
      process.off('SIGINT', onSignal);
      running.stop().then(
        () => reject(err),
        () => reject(err),
      );
    });
  });
}
