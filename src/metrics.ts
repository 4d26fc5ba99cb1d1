/**
 * The process's metrics, in the Prometheus text format (docs/metrics.md): one registry per
 * process (per deps: tests run several apps in one process), never prom-client's global one.
 * The domain counts through the plain functions of `Metrics`; only the metrics listener
 * (http/metrics-listener.ts) reads the registry.
 *
 * Labels are bounded by the code, never by what a tenant makes: a surface, a route pattern, a
 * status, an outcome, a step type, a connector's driver. A member can save hundreds of
 * workflows a minute, so a workflow's or connector's id, or an operation ref, is a label only
 * when the deployer asks for it (METRICS_WORKFLOW_LABELS), and then for at most
 * METRICS_WORKFLOW_LABELS_MAX values per metric, the least recently counted evicted. Never a
 * run id, an entity id, a raw path or a token.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export const METRICS_PREFIX = 'tributary_';

/** What the queue gauges read at scrape time (runs/queue-gauges.sql.ts). */
export interface QueueSample {
  ready: number;
  waiting: number;
  /** Runs of status waiting whose wait is not over (a delay, wait_until or wait_for_delivery). */
  parked: number;
  oldestReadyAgeSeconds: number;
  /** Ready runs held back by their concurrency key's limit, by workspace (absent: not read). */
  heldByConcurrency?: Map<string, number>;
}

export interface Metrics {
  readonly registry: Registry;
  /** One answered HTTP request: `route` is the route pattern (never the URL), 'unmatched' when none matched. */
  httpRequest(surface: string, route: string, method: string, status: number, seconds: number): void;
  /** A request refused by a rate window (429), by surface. */
  rateLimited(surface: string): void;
  /** A webhook delivery: accepted, duplicate, or the error code it was refused with. */
  webhookDelivery(outcome: string): void;
  /** Work a per-workspace quota turned away (quotas/quotas.ts): a delivery, a schedule tick, a replay. */
  quotaRefusal(quota: 'waiting_runs', path: 'webhook' | 'schedule' | 'replay'): void;
  /** A run's outcome recorded: `seconds` from its delivery to its end; the workflow is a label only when opted in. */
  runFinished(workflowId: string, outcome: string, seconds: number): void;
  /** One step executed in one attempt (`status` succeeded or failed). */
  stepAttempt(type: string, status: 'succeeded' | 'failed'): void;
  /** A step whose failure sent its run back to the queue for another attempt. */
  stepRetry(type: string): void;
  /** A run parked on a wait (`kind`: delay, wait_until, wait_for_delivery). */
  runWaited(kind: string): void;
  /** A parked run claimed again to resume its wait (`kind` as runWaited's). */
  runResumed(kind: string): void;
  /** A run cancelled (`from`: the status it had: queued, retrying or waiting). */
  runCancelled(from: string): void;
  /** One call to a provider: its status, or `error` when none answered; the connector and operation are labels only when opted in. */
  providerCall(connectorId: string, operation: string, driver: string, status: string, seconds: number): void;
  factsWritten(n: number): void;
  importLines(n: number): void;
  /** One factAggregate answered or refused after its mode was known (`mode`: latest, timeline or series). */
  graphqlAggregate(mode: 'latest' | 'timeline' | 'series', seconds: number): void;
}

export interface MetricsSources {
  /** The queue at this moment; rejects when the database does not answer. */
  queue: () => Promise<QueueSample>;
  /** The database pool: connections in use and callers waiting for one. */
  pool: () => { inUse: number; waiting: number };
  /** Process metrics (memory, CPU, event loop) too: only where a listener exposes them. */
  processMetrics: boolean;
  /**
   * The tenant-made labels (workflow_id, connector_id, operation), at most `max` values of
   * them per metric; undefined: left out (the default).
   */
  tenantLabels?: { max: number } | undefined;
}

/** How long a scrape waits for the queue's query before reporting the database down. */
const QUEUE_SAMPLE_TIMEOUT_MS = 2000;

const SECONDS_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
const RUN_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 21_600, 86_400];

/** A counter or a histogram; its labels are arguments of its counting function, by the same names. */
type MetricDefinition = {
  /** Without METRICS_PREFIX. */
  name: string;
  help: string;
  labels: readonly string[];
  /** Labels whose values tenants make (ids, operation refs): added only when opted in, and capped. */
  tenantLabels?: readonly string[];
} & (
  | {
      kind: 'counter';
      /** The argument added (only when above 0); without one, each call adds 1. */
      value?: string;
    }
  | {
      kind: 'histogram';
      buckets: readonly number[];
      /** The argument observed (a negative one as 0). */
      value: string;
    }
);

/** A counting function of Metrics: its arguments' names, in order, and the metrics one call counts in. */
interface CountingDefinition<Arity extends number> {
  args: readonly string[] & { length: Arity };
  metrics: readonly MetricDefinition[];
}

type Counting = Exclude<keyof Metrics, 'registry'>;

/**
 * Every counter and histogram, grouped by the counting function that feeds it (docs/metrics.md
 * lists the same). A new metric is a line here; its function a member of Metrics.
 */
export const METRIC_DEFINITIONS = {
  httpRequest: {
    args: ['surface', 'route', 'method', 'status', 'seconds'],
    metrics: [
      { name: 'http_requests_total', kind: 'counter', help: 'HTTP requests answered', labels: ['surface', 'route', 'method', 'status'] },
      {
        name: 'http_request_duration_seconds',
        kind: 'histogram',
        help: 'Time to answer an HTTP request',
        labels: ['surface', 'route', 'method'],
        buckets: SECONDS_BUCKETS,
        value: 'seconds',
      },
    ],
  },
  rateLimited: {
    args: ['surface'],
    metrics: [{ name: 'rate_limit_refusals_total', kind: 'counter', help: 'Requests refused by a rate window (429)', labels: ['surface'] }],
  },
  webhookDelivery: {
    args: ['outcome'],
    metrics: [{ name: 'webhook_deliveries_total', kind: 'counter', help: 'Webhook deliveries by outcome', labels: ['outcome'] }],
  },
  quotaRefusal: {
    args: ['quota', 'path'],
    metrics: [{ name: 'quota_refusals_total', kind: 'counter', help: 'Work refused by a per-workspace quota, by quota and path', labels: ['quota', 'path'] }],
  },
  runFinished: {
    args: ['workflow_id', 'outcome', 'seconds'],
    metrics: [
      { name: 'runs_finished_total', kind: 'counter', help: 'Workflow runs finished', labels: ['outcome'], tenantLabels: ['workflow_id'] },
      {
        name: 'run_duration_seconds',
        kind: 'histogram',
        help: 'Time from a run being queued to its end',
        labels: ['outcome'],
        tenantLabels: ['workflow_id'],
        buckets: RUN_BUCKETS,
        value: 'seconds',
      },
    ],
  },
  stepAttempt: {
    args: ['type', 'status'],
    metrics: [{ name: 'step_attempts_total', kind: 'counter', help: 'Steps executed, by step type and status', labels: ['type', 'status'] }],
  },
  stepRetry: {
    args: ['type'],
    metrics: [{ name: 'step_retries_total', kind: 'counter', help: 'Step failures that queued another attempt of the run', labels: ['type'] }],
  },
  runWaited: {
    args: ['kind'],
    metrics: [{ name: 'waits_total', kind: 'counter', help: 'Runs parked on a wait, by the kind of wait', labels: ['kind'] }],
  },
  runResumed: {
    args: ['kind'],
    metrics: [{ name: 'runs_resumed_total', kind: 'counter', help: 'Parked runs claimed again to resume their wait, by the kind of wait', labels: ['kind'] }],
  },
  runCancelled: {
    args: ['from'],
    metrics: [{ name: 'runs_cancelled_total', kind: 'counter', help: 'Runs cancelled, by the status they had', labels: ['from'] }],
  },
  providerCall: {
    args: ['connector_id', 'operation', 'driver', 'status', 'seconds'],
    metrics: [
      {
        name: 'provider_calls_total',
        kind: 'counter',
        help: 'Calls to providers through connectors',
        labels: ['driver', 'status'],
        tenantLabels: ['connector_id', 'operation'],
      },
      {
        name: 'provider_call_duration_seconds',
        kind: 'histogram',
        help: 'Time of a call to a provider',
        labels: ['driver'],
        tenantLabels: ['connector_id', 'operation'],
        buckets: SECONDS_BUCKETS,
        value: 'seconds',
      },
    ],
  },
  factsWritten: {
    args: ['n'],
    metrics: [{ name: 'facts_written_total', kind: 'counter', help: 'Facts stored (duplicates not counted)', labels: [], value: 'n' }],
  },
  importLines: {
    args: ['n'],
    metrics: [{ name: 'fact_import_lines_total', kind: 'counter', help: 'Lines read by fact imports', labels: [], value: 'n' }],
  },
  graphqlAggregate: {
    args: ['mode', 'seconds'],
    metrics: [
      { name: 'graphql_aggregate_requests_total', kind: 'counter', help: 'factAggregate fields resolved, by mode', labels: ['mode'] },
      {
        name: 'graphql_aggregate_seconds',
        kind: 'histogram',
        help: 'Time to resolve a factAggregate field, by mode',
        labels: ['mode'],
        buckets: SECONDS_BUCKETS,
        value: 'seconds',
      },
    ],
  },
} as const satisfies { [K in Counting]: CountingDefinition<Parameters<Metrics[K]>['length']> };

type Named = Record<string, unknown>;

type Labels = Record<string, string>;

/**
 * The series of a metric's tenant-made label values, least recently counted first: past
 * `max` values the oldest one's series are removed from the metric (prom-client's remove),
 * so the scrape holds at most `max` of them whatever tenants save.
 */
function tenantSeries(tenantLabels: readonly string[], max: number, remove: (labels: Labels) => void) {
  const byValue = new Map<string, Map<string, Labels>>();
  return (labels: Labels) => {
    const value = JSON.stringify(tenantLabels.map((l) => labels[l]));
    const series = byValue.get(value) ?? new Map<string, Labels>();
    byValue.delete(value);
    byValue.set(value, series);
    series.set(JSON.stringify(labels), labels);
    while (byValue.size > max) {
      const [oldest, gone] = byValue.entries().next().value!;
      byValue.delete(oldest);
      for (const l of gone.values()) remove(l);
    }
  };
}

/** One metric in `registry`, and what counts in it from a call's named arguments. */
function instrument(def: MetricDefinition, registry: Registry, tenant: { max: number } | undefined): (args: Named) => void {
  const tenantLabels = tenant === undefined ? [] : (def.tenantLabels ?? []);
  const labelNames = [...def.labels, ...tenantLabels];
  const common = { name: `${METRICS_PREFIX}${def.name}`, help: def.help, labelNames, registers: [registry] };
  const labels = (args: Named): Labels => Object.fromEntries(labelNames.map((l) => [l, String(args[l])]));
  const metric = def.kind === 'histogram' ? new Histogram({ ...common, buckets: [...def.buckets] }) : new Counter(common);
  const seen = tenant === undefined || tenantLabels.length === 0 ? undefined : tenantSeries(tenantLabels, tenant.max, (l) => metric.remove(l));
  const count =
    def.kind === 'histogram'
      ? (l: Labels, args: Named) => (metric as Histogram).observe(l, Math.max(0, Number(args[def.value])))
      : (l: Labels, args: Named) => {
          const n = def.value === undefined ? 1 : Number(args[def.value]);
          if (n > 0) (metric as Counter).inc(l, n);
        };
  return (args) => {
    const l = labels(args);
    count(l, args);
    seen?.(l);
  };
}

export function createMetrics(sources: MetricsSources): Metrics {
  const registry = new Registry();
  const registers = [registry];
  const p = METRICS_PREFIX;
  if (sources.processMetrics) collectDefaultMetrics({ register: registry, prefix: p });

  const counting = {} as Record<Counting, (...values: unknown[]) => void>;
  for (const [fn, def] of Object.entries(METRIC_DEFINITIONS) as Array<[Counting, CountingDefinition<number>]>) {
    for (const m of def.metrics) {
      const unknown = [...m.labels, ...(m.tenantLabels ?? []), m.value ?? []].flat().filter((a) => !def.args.includes(a));
      if (unknown.length > 0) throw new Error(`metric ${m.name}: ${unknown.join(', ')} not an argument of ${fn}`);
    }
    const counts = def.metrics.map((m) => instrument(m, registry, sources.tenantLabels));
    counting[fn] = (...values) => {
      const args = Object.fromEntries(def.args.map((name, i) => [name, values[i]]));
      for (const count of counts) count(args);
    };
  }

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
  // By workspace only when tenant labels are asked for (METRICS_WORKFLOW_LABELS), the largest first, at most their max.
  const heldLabels = sources.tenantLabels === undefined ? [] : ['workspace_id'];
  new Gauge({
    name: `${p}runs_held_by_concurrency`,
    help: 'Ready runs held back because their concurrency key has as many runs executing as its limit',
    labelNames: heldLabels,
    registers,
    async collect() {
      const s = await sample();
      this.reset();
      if (s?.heldByConcurrency === undefined) return;
      const held = [...s.heldByConcurrency.entries()];
      if (sources.tenantLabels === undefined) {
        this.set(held.reduce((sum, [, n]) => sum + n, 0));
        return;
      }
      held.sort((a, b) => b[1] - a[1]);
      for (const [workspace, n] of held.slice(0, sources.tenantLabels.max)) this.set({ workspace_id: workspace }, n);
    },
  });
  new Gauge({
    name: `${p}runs_waiting`,
    help: 'Runs parked on a wait (delay, wait_until, wait_for_delivery) whose time or delivery has not come: they hold no worker slot',
    registers,
    async collect() {
      const s = await sample();
      this.reset();
      if (s !== undefined) this.set(s.parked);
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

  // The functions take the arguments Metrics declares: METRIC_DEFINITIONS' `satisfies` holds each arity to its member.
  return { registry, ...(counting as unknown as Omit<Metrics, 'registry'>) };
}
