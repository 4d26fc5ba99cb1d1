/**
 * `tributary serve`: config -> deps (db, migrations) -> first-start bootstrap -> HTTP.
 * SIGTERM/SIGINT: readiness turns 503, the listener stops accepting, in-flight requests
 * finish (bounded by SHUTDOWN_GRACE_MS; those still running then are logged and cut off),
 * then the pool closes.
 */
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { Config } from './config.ts';
import { buildApp } from './app.ts';
import { closeDeps, createDeps, type Deps } from './deps.ts';
import { bootstrapIfEmpty } from './admin/bootstrap.ts';
import { startScheduler, type Scheduler } from './worker/scheduler.ts';
import { startWorker, type Worker } from './worker/worker.ts';
import { requestsInFlight } from './http/connections.ts';

export interface Running {
  app: FastifyInstance;
  deps: Deps;
  url: string;
  stop(): Promise<void>;
}

export async function serve(config: Config, opts: { http: boolean; worker: boolean; log?: Logger }): Promise<Running> {
  const deps = await createDeps(config, opts.log ? { log: opts.log } : {});
  await bootstrapIfEmpty(deps);
  const app = await buildApp(deps);
  let url = '';
  if (opts.http) {
    url = await app.listen({ port: config.port, host: config.host });
  }
  const scheduler: Scheduler | undefined = opts.worker ? startScheduler(deps) : undefined;
  const worker: Worker | undefined = opts.worker ? startWorker(deps) : undefined;
  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      deps.draining.value = true;
      deps.log.info('draining');
      await scheduler?.stop();
      // Responses from here on carry Connection: close (src/http/connections.ts) and idle
      // connections are closed, so no client sends a request on a connection about to go.
      const timer = setTimeout(() => {
        // The route pattern, never the URL: a query string may hold a secret.
        for (const request of requestsInFlight(app)) request.log.warn({ method: request.method, route: request.routeOptions.url ?? 'no route' }, 'request cut off at shutdown');
        app.server.closeAllConnections?.();
      }, config.shutdownGraceMs);
      // The worker and the HTTP server drain side by side, within the same grace period.
      await Promise.all([app.close(), worker?.stop(config.shutdownGraceMs)]);
      clearTimeout(timer);
      await closeDeps(deps);
      deps.log.info('stopped');
    })());
  return { app, deps, url, stop };
}

/** Runs until SIGTERM or SIGINT, then drains and resolves. */
export async function runUntilSignal(running: Running): Promise<void> {
  await new Promise<void>((resolve) => {
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
  });
}
