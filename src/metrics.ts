/**
 * The process's metrics, in the Prometheus text format (docs/metrics.md): one registry per
 * process (per deps: tests run several apps in one process), never prom-client's global one.
 * The domain counts through the plain functions of `Metrics`; only the metrics listener
 * (http/metrics-listener.ts) reads the registry.
 *
 * Labels are bounded: a surface, a route pattern, a status, an outcome, a step type, and the
 * ids of workflows and connectors (configuration, not traffic). Never a run id, an entity id,
 * a raw path or a token.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export const METRICS_PREFIX = 'tributary_';

/** What the queue gauges read at scrape time (workflows/queue-gauges.sql.ts). */
export interface QueueSample {
  ready: number;
  waiting: number;
  oldestReadyAgeSeconds: number;
}

export interface Metrics {
  readonly registry: Registry;
  /** One answered HTTP request: `route` is the route pattern (never the URL), 'unmatched' when none matched. */
  httpRequest(surface: string, route: string, method: string, status: number, seconds: number): void;
  /** A request refused by a rate window (429), by surface. */
  rateLimited(surface: string): void;
  /** A webhook delivery: accepted, duplicate, or the error code it was refused with. */
  webhookDelivery(outcome: string): void;
  /** A run's outcome recorded: `seconds` from its delivery to its end. */
  runFinished(workflowId: string, outcome: string, seconds: number): void;
  /** One step executed in one attempt (`status` succeeded or failed). */
  stepAttempt(type: string, status: 'succeeded' | 'failed'): void;
  /** A step whose failure sent its run back to the queue for another attempt. */
  stepRetry(type: string): void;
  /** One call to a provider: its status, or `error` when none answered. */
  providerCall(connectorId: string, operation: string, status: string, seconds: number): void;
  factsWritten(n: number): void;
  importLines(n: number): void;
}

export interface MetricsSources {
  /** The queue at this moment; rejects when the database does not answer. */
  queue: () => Promise<QueueSample>;
  /** The database pool: connections in use and callers waiting for one. */
  pool: () => { inUse: number; waiting: number };
  /** Process metrics (memory, CPU, event loop) too: only where a listener exposes them. */
  processMetrics: boolean;
}

/** How long a scrape waits for the queue's query before reporting the database down. */
const QUEUE_SAMPLE_TIMEOUT_MS = 2000;

const SECONDS_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
const RUN_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 21_600, 86_400];

export function createMetrics(sources: MetricsSources): Metrics {
  const registry = new Registry();
  const registers = [registry];
  const p = METRICS_PREFIX;
  if (sources.processMetrics) collectDefaultMetrics({ register: registry, prefix: p });

  const httpRequests = new Counter({
    name: `${p}http_requests_total`,
    help: 'HTTP requests answered',
    labelNames: ['surface', 'route', 'method', 'status'],
    registers,
  });
  const httpSeconds = new Histogram({
    name: `${p}http_request_duration_seconds`,
    help: 'Time to answer an HTTP request',
    labelNames: ['surface', 'route', 'method'],
    buckets: SECONDS_BUCKETS,
    registers,
  });
  const rateLimited = new Counter({
    name: `${p}rate_limit_refusals_total`,
    help: 'Requests refused by a rate window (429)',
    labelNames: ['surface'],
    registers,
  });
  const deliveries = new Counter({ name: `${p}webhook_deliveries_total`, help: 'Webhook deliveries by outcome', labelNames: ['outcome'], registers });
  const runs = new Counter({ name: `${p}runs_finished_total`, help: 'Workflow runs finished', labelNames: ['workflow_id', 'outcome'], registers });
  const runSeconds = new Histogram({
    name: `${p}run_duration_seconds`,
    help: 'Time from a run being queued to its end',
    labelNames: ['workflow_id', 'outcome'],
    buckets: RUN_BUCKETS,
    registers,
  });
  const stepAttempts = new Counter({
    name: `${p}step_attempts_total`,
    help: 'Steps executed, by step type and status',
    labelNames: ['type', 'status'],
    registers,
  });
  const stepRetries = new Counter({
    name: `${p}step_retries_total`,
    help: 'Step failures that queued another attempt of the run',
    labelNames: ['type'],
    registers,
  });
  const providerCalls = new Counter({
    name: `${p}provider_calls_total`,
    help: 'Calls to providers through connectors',
    labelNames: ['connector_id', 'operation', 'status'],
    registers,
  });
  const providerSeconds = new Histogram({
    name: `${p}provider_call_duration_seconds`,
    help: 'Time of a call to a provider',
    labelNames: ['connector_id', 'operation'],
    buckets: SECONDS_BUCKETS,
    registers,
  });
  const facts = new Counter({ name: `${p}facts_written_total`, help: 'Facts stored (duplicates not counted)', registers });
  const importLines = new Counter({ name: `${p}fact_import_lines_total`, help: 'Lines read by fact imports', registers });

  // The gauges read at scrape time share one query per scrape (prom-client collects them side by side).
  let sampling: Promise<QueueSample | undefined> | undefined;
  const sample = () =>
    (sampling ??= (async () => {
      let timer: NodeJS.Timeout | undefined;
      try {
        const timeout = new Promise<never>((_resolve, reject) => {
          timer = setTimeout(() => reject(new Error('the queue query timed out')), QUEUE_SAMPLE_TIMEOUT_MS);
        });
        return await Promise.race([sources.queue(), timeout]);
      } catch {
        // The scrape never fails for the database: the queue gauges are left out and database_up says 0.
        return undefined;
      } finally {
        clearTimeout(timer);
        setImmediate(() => (sampling = undefined));
      }
    })());
  new Gauge({
    name: `${p}database_up`,
    help: 'Whether the database answered the queue query of this scrape (1) or not (0)',
    registers,
    async collect() {
      this.set((await sample()) === undefined ? 0 : 1);
    },
  });
  new Gauge({
    name: `${p}queue_depth`,
    help: 'Runs waiting in the queue: ready to claim now, or waiting for a retry time',
    labelNames: ['state'],
    registers,
    async collect() {
      const s = await sample();
      this.reset();
      if (s === undefined) return;
      this.set({ state: 'ready' }, s.ready);
      this.set({ state: 'waiting' }, s.waiting);
    },
  });
  new Gauge({
    name: `${p}queue_oldest_age_seconds`,
    help: 'How long the oldest ready run has waited to be claimed (0: none waits)',
    labelNames: ['state'],
    registers,
    async collect() {
      const s = await sample();
      this.reset();
      if (s !== undefined) this.set({ state: 'ready' }, s.oldestReadyAgeSeconds);
    },
  });
  new Gauge({
    name: `${p}database_pool_connections`,
    help: 'Database connections of this process, in use or waited for',
    labelNames: ['state'],
    registers,
    collect() {
      const { inUse, waiting } = sources.pool();
      this.set({ state: 'in_use' }, inUse);
      this.set({ state: 'waiting' }, waiting);
    },
  });

  return {
    registry,
    httpRequest(surface, route, method, status, seconds) {
      httpRequests.inc({ surface, route, method, status: String(status) });
      httpSeconds.observe({ surface, route, method }, seconds);
    },
    rateLimited: (surface) => rateLimited.inc({ surface }),
    webhookDelivery: (outcome) => deliveries.inc({ outcome }),
    runFinished(workflowId, outcome, seconds) {
      runs.inc({ workflow_id: workflowId, outcome });
      runSeconds.observe({ workflow_id: workflowId, outcome }, Math.max(0, seconds));
    },
    stepAttempt: (type, status) => stepAttempts.inc({ type, status }),
    stepRetry: (type) => stepRetries.inc({ type }),
    providerCall(connectorId, operation, status, seconds) {
      providerCalls.inc({ connector_id: connectorId, operation, status });
      providerSeconds.observe({ connector_id: connectorId, operation }, seconds);
    },
    factsWritten: (n) => {
      if (n > 0) facts.inc(n);
    },
    importLines: (n) => {
      if (n > 0) importLines.inc(n);
    },
  };
}
