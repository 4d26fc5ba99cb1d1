/**
 * The only reader of process.env. Every setting is read and validated once; a bad value
 * stops the process at start with a message naming the variable.
 */
import os from 'node:os';
import path from 'node:path';
import { Cron } from 'croner';
import ipaddr from 'ipaddr.js';

/** Per-workspace quotas, each named by its setting in the answers that refuse past it. */
export interface Quotas {
  /** QUOTA_WORKFLOWS */
  readonly workflows: number;
  /** QUOTA_WEBHOOK_TRIGGERS */
  readonly webhookTriggers: number;
  /** QUOTA_WEBHOOK_TRIGGERS_PER_WORKFLOW */
  readonly webhookTriggersPerWorkflow: number;
  /** QUOTA_SCHEDULE_TRIGGERS */
  readonly scheduleTriggers: number;
  /** QUOTA_CONNECTORS */
  readonly connectors: number;
  /** QUOTA_DATA_MODELS */
  readonly dataModels: number;
  /** QUOTA_FIELDS_PER_DATA_MODEL */
  readonly fieldsPerDataModel: number;
  /** QUOTA_WAITING_RUNS: queued and retrying runs of a workspace. */
  readonly waitingRuns: number;
}

export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
export type LogFormat = 'json' | 'pretty';

export interface Config {
  readonly port: number;
  readonly host: string;
  /** PostgreSQL connection string; when absent, embedded PGlite in dataDir. */
  readonly databaseUrl: string | undefined;
  readonly databasePoolSize: number;
  /** How long opening a PostgreSQL connection may take (DATABASE_CONNECT_TIMEOUT_MS). */
  readonly databaseConnectTimeoutMs: number;
  readonly redisUrl: string | undefined;
  /** How long a Redis command may take before the rate window falls back (REDIS_TIMEOUT_MS). */
  readonly redisTimeoutMs: number;
  readonly dataDir: string;
  readonly tokenTtlSeconds: number;
  readonly idempotencyTtlSeconds: number;
  readonly rateLimit: { readonly max: number; readonly windowSeconds: number };
  readonly tokenRateLimit: { readonly max: number; readonly windowSeconds: number };
  readonly logLevel: LogLevel;
  /** LOG_FORMAT: JSON lines, or readable lines (the default when stdout is a terminal). */
  readonly logFormat: LogFormat;
  /** Admin API bearer token; when absent, one is generated into DATA_DIR/admin-token. */
  readonly adminToken: string | undefined;
  readonly bodyLimitBytes: number;
  readonly shutdownGraceMs: number;
  /** Time allowed for a request's line and headers (HEADERS_TIMEOUT_MS). */
  readonly headersTimeoutMs: number;
  /** Time allowed for a request's body once reading starts; for streamed uploads, the longest pause (REQUEST_TIMEOUT_MS). */
  readonly requestTimeoutMs: number;
  /** How long an answer may wait for the client to take any of it before the connection is closed (RESPONSE_TIMEOUT_MS). */
  readonly responseTimeoutMs: number;
  /** Open connections allowed from one client address; 0: no limit (MAX_CONNECTIONS_PER_ADDRESS). */
  readonly maxConnectionsPerAddress: number;
  /**
   * Which peers' X-Forwarded-For is believed (TRUST_PROXY): none (false), or addresses,
   * CIDR ranges and proxy-addr's names (loopback, linklocal, uniquelocal).
   */
  readonly trustProxy: false | readonly string[];
  readonly worker: boolean;
  /** `tributary serve` serves the browser console at /console (CONSOLE, default true). */
  readonly console: boolean;
  /** Connector base_urls may point at loopback, private, link-local or metadata addresses (ALLOW_PRIVATE_EGRESS). */
  readonly allowPrivateEgress: boolean;
  /** Largest OpenAPI document an api_spec takes, in bytes (API_SPEC_MAX_BYTES). */
  readonly apiSpecMaxBytes: number;
  /** Largest JSON:API list answer; a default page holds what fits, a page asked for past it is 400 (LIST_MAX_BYTES). */
  readonly listMaxBytes: number;
  /** Most operations an api_spec's document may have (API_SPEC_MAX_OPERATIONS). */
  readonly apiSpecMaxOperations: number;
  /**
   * Reading a document runs in worker threads (openapi/import-pool.ts): how many at once
   * (API_SPEC_IMPORT_PROCESSES), how many more may wait (API_SPEC_IMPORT_QUEUE), and each
   * one's time and heap (API_SPEC_IMPORT_TIMEOUT_MS, API_SPEC_IMPORT_HEAP_MB).
   */
  readonly apiSpecImport: { readonly processes: number; readonly queue: number; readonly timeoutMs: number; readonly heapMb: number };
  /** When the sweep runs (SWEEP_CRON): a 5-field cron expression, evaluated in UTC. */
  readonly sweepCron: string;
  /** Largest webhook delivery body (WEBHOOK_MAX_BODY_BYTES). */
  readonly webhookMaxBodyBytes: number;
  /** Deliveries per trigger per fixed window (WEBHOOK_RATE_LIMIT_MAX, WEBHOOK_RATE_LIMIT_WINDOW_SECONDS). */
  readonly webhookRateLimit: { readonly max: number; readonly windowSeconds: number };
  /** Days a delivery identity deduplicates (DELIVERY_GUARD_DAYS). */
  readonly deliveryGuardDays: number;
  /** Days finished runs are kept (RUN_RETENTION_DAYS). */
  readonly runRetentionDays: number;
  /**
   * What one workspace may hold (docs/configuration.md, Quotas): workflows, triggers,
   * connectors, data models and their fields, and runs waiting in the queue.
   */
  readonly quotas: Quotas;
  /** The shortest time between two ticks of a schedule trigger, checked at save (SCHEDULE_MIN_INTERVAL_SECONDS). */
  readonly scheduleMinIntervalSeconds: number;
  /** Runs one worker process executes at once (WORKER_CONCURRENCY). */
  readonly workerConcurrency: number;
  /** Seconds a claimed run stays leased without a heartbeat (WORKER_LEASE_SECONDS). */
  readonly workerLeaseSeconds: number;
  /** How often an idle worker looks for runs it was not told about (WORKER_POLL_MS). */
  readonly workerPollMs: number;
  /** Schedule ticks one pass of a process fires at most (SCHEDULE_TICKS_PER_PASS). */
  readonly scheduleTicksPerPass: number;
  /** Schedule ticks of one workspace one pass fires at most (SCHEDULE_TICKS_PER_WORKSPACE): the rest wait their turn. */
  readonly scheduleTicksPerWorkspace: number;
  /** Attempts of a run before it fails (RUN_MAX_ATTEMPTS). */
  readonly runMaxAttempts: number;
  /** Delays before the 2nd, 3rd, ... attempt, in ms; attempts past the list wait its last entry (RUN_RETRY_SCHEDULE). */
  readonly runRetrySchedule: readonly number[];
  /** The longest a provider's Retry-After may hold a run back, in ms (RUN_RETRY_AFTER_MAX). */
  readonly runRetryAfterMaxMs: number;
  /** Times a run may lose its worker mid-attempt (the process died) before it fails (RUN_MAX_LEASE_LOSSES). */
  readonly runMaxLeaseLosses: number;
  /** Child processes that evaluate workflow expressions (EXPRESSION_PROCESSES). */
  readonly expressionProcesses: number;
  /** Heap of one expression process, in MB (EXPRESSION_MEMORY_MB). */
  readonly expressionMemoryMb: number;
  /** Time budget of one expression evaluation (EXPRESSION_TIMEOUT_MS). */
  readonly expressionTimeoutMs: number;
  /**
   * Test runs (POST workflows/:id/test_run), a class apart that never takes capacity from
   * runs: their own expression processes (TEST_RUN_EXPRESSION_PROCESSES) at a lower OS
   * priority (TEST_RUN_EXPRESSION_PRIORITY, a nice value), at most `concurrency` at once
   * per workspace in one process (TEST_RUN_CONCURRENCY) and `max` per `windowSeconds` per
   * workspace, shared through Redis (TEST_RUN_RATE_MAX, TEST_RUN_RATE_WINDOW_SECONDS).
   */
  readonly testRuns: {
    readonly expressionProcesses: number;
    readonly expressionPriority: number;
    readonly concurrency: number;
    readonly max: number;
    readonly windowSeconds: number;
  };
  /**
   * What a stored run record keeps, as JSON: one step's output (RUN_STEP_OUTPUT_MAX_BYTES),
   * one error (RUN_STEP_ERROR_MAX_BYTES), all the steps (RUN_STEPS_MAX_BYTES).
   */
  readonly runRecord: { readonly outputBytes: number; readonly errorBytes: number; readonly stepsBytes: number };
  /** The provider-facing relay (src/relay/): `tributary relay`, or a second listener of `serve` when RELAY_PORT is set. */
  readonly relay: RelayConfig;
  /** METRICS_PORT: the listener of GET /metrics (docs/metrics.md); undefined: none. */
  readonly metricsPort: number | undefined;
  /**
   * METRICS_HOST (default 127.0.0.1, whatever HOST is): the scrape has no token, so a
   * listener on every address is asked for by name, never inherited from HOST.
   */
  readonly metricsHost: string;
  /**
   * METRICS_WORKFLOW_LABELS (default false): workflow_id, connector_id and operation as labels;
   * METRICS_WORKFLOW_LABELS_MAX of their values per metric, least recently counted evicted.
   */
  readonly metricsTenantLabels: { readonly max: number } | undefined;
  /** Traces over OTLP/HTTP (docs/tracing.md); undefined: tracing is off and OpenTelemetry is never loaded. */
  readonly tracing: TracingConfig | undefined;
}

export interface TracingConfig {
  /** Where spans are sent: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as given, else OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces. */
  readonly url: string;
  /** OTEL_SERVICE_NAME (default tributary). */
  readonly serviceName: string;
  /** OTEL_EXPORTER_OTLP_HEADERS, then OTEL_EXPORTER_OTLP_TRACES_HEADERS over them: sent with every export (a collector's API key). */
  readonly headers: Readonly<Record<string, string>>;
}

export interface RelayConfig {
  /** RELAY_PORT; undefined: `serve` runs no relay and `tributary relay` listens on 8081. */
  readonly port: number | undefined;
  /** RELAY_HOST (default HOST). */
  readonly host: string;
  /** RELAY_TARGET_URL: the service the relay forwards to (default: this process's own listener inside serve, else http://127.0.0.1:PORT). */
  readonly targetUrl: string | undefined;
  /**
   * RELAY_PUBLIC_URL: the relay as providers reach it (https://hooks.example.com), named in a
   * workflow save's answer (meta.relay_url); default inside serve with RELAY_PORT: the relay's own listener.
   */
  readonly publicUrl: string | undefined;
  /** RELAY_CLIENT_ID and RELAY_CLIENT_SECRET, both or neither. */
  readonly clientId: string | undefined;
  readonly clientSecret: string | undefined;
  /** RELAY_CREDENTIALS_FILE: a JSON file with client_id and client_secret (bootstrap.json has that shape). */
  readonly credentialsFile: string | undefined;
  /** How long the service may take to answer a forwarded delivery or an exchange (RELAY_UPSTREAM_TIMEOUT_MS). */
  readonly upstreamTimeoutMs: number;
  /** Keep-alive connections the relay holds to the service (RELAY_UPSTREAM_CONNECTIONS). */
  readonly upstreamConnections: number;
}

export class ConfigError extends Error {
  constructor(variable: string, problem: string) {
    super(`Invalid configuration: ${variable} ${problem}`);
    this.name = 'ConfigError';
  }
}

type Env = Readonly<Record<string, string | undefined>>;

function str(env: Env, name: string): string | undefined {
  const v = env[name];
  return v === undefined || v.trim() === '' ? undefined : v.trim();
}

const DURATION_UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
/** The longest delay a duration setting takes: a week, beyond which a run's record would outlive its retention anyway. */
const MAX_DURATION_MS = 7 * 86_400_000;

/** Comma-separated durations such as `30s,2m,15m,1h,6h` (units ms, s, m, h, d), each between 1 ms and 7 days. */
function durationList(env: Env, name: string, def: string, maxEntries = 100): number[] {
  const v = str(env, name) ?? def;
  const parts = v.split(',').map((p) => p.trim());
  if (parts.length > maxEntries)
    throw new ConfigError(
      name,
      maxEntries === 1 ? `must be one duration such as 1h, got "${v}"` : `must list at most ${maxEntries} durations, got ${parts.length}`,
    );
  return parts.map((p) => {
    const m = /^(\d{1,9})(ms|s|m|h|d)$/.exec(p);
    if (!m)
      throw new ConfigError(
        name,
        `must be ${maxEntries === 1 ? 'a duration' : 'comma-separated durations'} such as 30s, 15m, 6h or 1d (units ms, s, m, h, d), got "${p}"`,
      );
    const ms = Number(m[1]) * DURATION_UNITS[m[2]!]!;
    if (ms < 1 || ms > MAX_DURATION_MS) throw new ConfigError(name, `durations must be between 1ms and 7d, got "${p}"`);
    return ms;
  });
}

/** RUN_RETRY_SCHEDULE; the setting it replaced is refused by name, so an upgrade does not silently change how retries wait. */
function retrySchedule(env: Env): number[] {
  if (str(env, 'RUN_RETRY_BASE_MS') !== undefined)
    throw new ConfigError('RUN_RETRY_BASE_MS', 'is no longer read: set RUN_RETRY_SCHEDULE instead (comma-separated waits such as 1m,10m,1h,6h)');
  return durationList(env, 'RUN_RETRY_SCHEDULE', '1m,10m,1h,6h');
}

/** SCHEDULE_TICKS_PER_PASS and SCHEDULE_TICKS_PER_WORKSPACE: a workspace's share cannot exceed the pass. */
function scheduleTicks(env: Env): { scheduleTicksPerPass: number; scheduleTicksPerWorkspace: number } {
  const perPass = int(env, 'SCHEDULE_TICKS_PER_PASS', 1000, 1, 100_000);
  const perWorkspace = int(env, 'SCHEDULE_TICKS_PER_WORKSPACE', 100, 1, 100_000);
  if (perWorkspace > perPass) throw new ConfigError('SCHEDULE_TICKS_PER_WORKSPACE', `must be at most SCHEDULE_TICKS_PER_PASS (${perPass})`);
  return { scheduleTicksPerPass: perPass, scheduleTicksPerWorkspace: perWorkspace };
}

function int(env: Env, name: string, def: number, min: number, max: number): number {
  const v = str(env, name);
  if (v === undefined) return def;
  if (!/^\d+$/.test(v)) throw new ConfigError(name, `must be a whole number, got "${v}"`);
  const n = Number(v);
  if (n < min || n > max) throw new ConfigError(name, `must be between ${min} and ${max}, got ${n}`);
  return n;
}

function bool(env: Env, name: string, def: boolean): boolean {
  const v = str(env, name);
  if (v === undefined) return def;
  if (['true', '1', 'yes'].includes(v.toLowerCase())) return true;
  if (['false', '0', 'no'].includes(v.toLowerCase())) return false;
  throw new ConfigError(name, `must be true or false, got "${v}"`);
}

function url(env: Env, name: string, protocols: readonly string[]): string | undefined {
  const v = str(env, name);
  if (v === undefined) return undefined;
  let parsed: URL;
  try {
    parsed = new URL(v);
  } catch {
    throw new ConfigError(name, 'must be a URL');
  }
  if (!protocols.includes(parsed.protocol)) throw new ConfigError(name, `must use ${protocols.join(' or ')}`);
  return v;
}

const PROXY_NAMES = ['loopback', 'linklocal', 'uniquelocal'];

/**
 * TRUST_PROXY. `true` and hop counts are refused on purpose: believing whoever connects lets
 * any client pick the address its token-exchange window is counted under.
 */
function trustProxy(env: Env): false | readonly string[] {
  const v = str(env, 'TRUST_PROXY');
  if (v === undefined || ['false', 'no'].includes(v.toLowerCase())) return false;
  const entries = v.split(',').map((e) => e.trim());
  for (const e of entries) {
    if (PROXY_NAMES.includes(e)) continue;
    const [addr, bits, extra] = e.split('/');
    const ok =
      extra === undefined &&
      addr !== undefined &&
      (ipaddr.IPv4.isValidFourPartDecimal(addr) || ipaddr.IPv6.isValid(addr)) &&
      (bits === undefined || validPrefix(addr, bits));
    if (!ok)
      throw new ConfigError('TRUST_PROXY', `must be comma-separated addresses, CIDR ranges, loopback, linklocal or uniquelocal (the balancer's), got "${e}"`);
  }
  return entries;
}

function validPrefix(addr: string, bits: string): boolean {
  if (!/^\d{1,3}$/.test(bits)) return false;
  return Number(bits) <= (ipaddr.parse(addr).kind() === 'ipv4' ? 32 : 128);
}

/** A standard 5-field cron expression (no seconds, no nicknames) that names at least one future instant. */
function cronExpression(env: Env, name: string, def: string): string {
  const v = (str(env, name) ?? def).split(/\s+/).join(' ');
  const bad = (why: string) => new ConfigError(name, `must be a 5-field cron expression (minute hour day-of-month month day-of-week, UTC)${why}, got "${v}"`);
  // Counted here as well: croner's 5-part mode still expands nicknames such as @daily.
  if (v.split(' ').length !== 5) throw bad('');
  let next: Date | null;
  try {
    next = new Cron(v, { timezone: 'UTC', mode: '5-part' }).nextRun();
  } catch {
    throw bad('');
  }
  if (next === null) throw bad(' that matches some date');
  return v;
}

/** An OTLP endpoint: http or https, no credentials in it (they would be logged with it; use the headers). */
function otlpUrl(env: Env, name: string): string | undefined {
  const v = url(env, name, ['http:', 'https:']);
  if (v !== undefined && (new URL(v).username !== '' || new URL(v).password !== ''))
    throw new ConfigError(name, 'must not hold credentials: give them in OTEL_EXPORTER_OTLP_HEADERS');
  return v;
}

const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/**
 * `key1=value1,key2=value2` (W3C baggage form, values percent-encoded), as the OTLP exporter
 * specification defines it. A bad entry is named by its position: its value may be a secret.
 */
function otlpHeaders(env: Env, name: string): Record<string, string> {
  const v = str(env, name);
  const out: Record<string, string> = {};
  if (v === undefined) return out;
  v.split(',').forEach((entry, i) => {
    const at = entry.indexOf('=');
    const key = (at < 0 ? entry : entry.slice(0, at)).trim();
    if (at < 0 || !HEADER_NAME.test(key)) throw new ConfigError(name, `entry ${i + 1} must be name=value with a header name before the =`);
    let value: string;
    try {
      value = decodeURIComponent(entry.slice(at + 1).trim());
    } catch {
      throw new ConfigError(name, `entry ${i + 1} (${key}) has a malformed percent-encoding`);
    }
    if (/[\r\n\0]/.test(value)) throw new ConfigError(name, `entry ${i + 1} (${key}) must not hold line breaks or NUL`);
    out[key.toLowerCase()] = value;
  });
  return out;
}

/** OpenTelemetry's standard variables, as far as traces over OTLP/HTTP take them. */
function tracingConfig(env: Env): TracingConfig | undefined {
  const base = otlpUrl(env, 'OTEL_EXPORTER_OTLP_ENDPOINT');
  const traces = otlpUrl(env, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT');
  const protocol = str(env, 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL') ?? str(env, 'OTEL_EXPORTER_OTLP_PROTOCOL');
  if (protocol !== undefined && protocol !== 'http/json' && protocol !== 'http/protobuf')
    throw new ConfigError(
      str(env, 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL') === undefined ? 'OTEL_EXPORTER_OTLP_PROTOCOL' : 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL',
      `must be http/json or http/protobuf (spans are sent as OTLP/HTTP JSON; gRPC is not supported: use the collector's HTTP port, 4318), got "${protocol}"`,
    );
  const headers = { ...otlpHeaders(env, 'OTEL_EXPORTER_OTLP_HEADERS'), ...otlpHeaders(env, 'OTEL_EXPORTER_OTLP_TRACES_HEADERS') };
  const serviceName = str(env, 'OTEL_SERVICE_NAME') ?? 'tributary';
  if (serviceName.length > 255) throw new ConfigError('OTEL_SERVICE_NAME', 'must be at most 255 characters');
  if (bool(env, 'OTEL_SDK_DISABLED', false)) return undefined;
  // The signal's own endpoint is used as given; the base one gets the signal's path (OTLP exporter specification).
  const target = traces ?? (base === undefined ? undefined : `${base.replace(/\/+$/, '')}/v1/traces`);
  if (target === undefined) return undefined;
  return Object.freeze({ url: target, serviceName, headers: Object.freeze(headers) });
}

const LOG_LEVELS: readonly LogLevel[] = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

export function loadConfig(env: Env = process.env, stdoutIsTerminal: boolean = process.stdout.isTTY === true): Config {
  const logLevel = (str(env, 'LOG_LEVEL') ?? 'info') as LogLevel;
  if (!LOG_LEVELS.includes(logLevel)) throw new ConfigError('LOG_LEVEL', `must be one of ${LOG_LEVELS.join(', ')}`);
  const logFormat = (str(env, 'LOG_FORMAT')?.toLowerCase() ?? (stdoutIsTerminal ? 'pretty' : 'json')) as LogFormat;
  if (logFormat !== 'json' && logFormat !== 'pretty') throw new ConfigError('LOG_FORMAT', `must be json or pretty, got "${String(str(env, 'LOG_FORMAT'))}"`);
  const adminToken = str(env, 'TRIBUTARY_ADMIN_TOKEN');
  if (adminToken !== undefined && adminToken.length < 32) throw new ConfigError('TRIBUTARY_ADMIN_TOKEN', 'must be at least 32 characters');
  const host = str(env, 'HOST') ?? '127.0.0.1';
  const relayClientId = str(env, 'RELAY_CLIENT_ID');
  const relayClientSecret = str(env, 'RELAY_CLIENT_SECRET');
  if ((relayClientId === undefined) !== (relayClientSecret === undefined))
    throw new ConfigError(
      relayClientId === undefined ? 'RELAY_CLIENT_ID' : 'RELAY_CLIENT_SECRET',
      'must be set together with the other of RELAY_CLIENT_ID and RELAY_CLIENT_SECRET',
    );
  const relayCredentialsFile = str(env, 'RELAY_CREDENTIALS_FILE');
  if (relayClientId !== undefined && relayCredentialsFile !== undefined)
    throw new ConfigError('RELAY_CREDENTIALS_FILE', 'cannot be set together with RELAY_CLIENT_ID and RELAY_CLIENT_SECRET: give the account one way');
  const relayPort = str(env, 'RELAY_PORT') === undefined ? undefined : int(env, 'RELAY_PORT', 8081, 0, 65535);
  return Object.freeze({
    port: int(env, 'PORT', 8080, 0, 65535),
    host,
    databaseUrl: url(env, 'DATABASE_URL', ['postgres:', 'postgresql:']),
    databasePoolSize: int(env, 'DATABASE_POOL_SIZE', 10, 1, 200),
    databaseConnectTimeoutMs: int(env, 'DATABASE_CONNECT_TIMEOUT_MS', 5000, 100, 600_000),
    redisUrl: url(env, 'REDIS_URL', ['redis:', 'rediss:']),
    redisTimeoutMs: int(env, 'REDIS_TIMEOUT_MS', 500, 10, 60_000),
    dataDir: path.resolve(str(env, 'DATA_DIR') ?? '.tributary'),
    tokenTtlSeconds: int(env, 'TOKEN_TTL_SECONDS', 900, 60, 86_400),
    idempotencyTtlSeconds: int(env, 'IDEMPOTENCY_TTL', 86_400, 60, 30 * 86_400),
    rateLimit: Object.freeze({
      max: int(env, 'RATE_LIMIT_MAX', 600, 1, 1_000_000),
      windowSeconds: int(env, 'RATE_LIMIT_WINDOW_SECONDS', 60, 1, 86_400),
    }),
    tokenRateLimit: Object.freeze({
      max: int(env, 'TOKEN_RATE_LIMIT_MAX', 1_200, 1, 1_000_000_000),
      windowSeconds: int(env, 'TOKEN_RATE_LIMIT_WINDOW_SECONDS', 60, 1, 86_400),
    }),
    logLevel,
    logFormat,
    adminToken,
    bodyLimitBytes: int(env, 'BODY_LIMIT_BYTES', 1_048_576, 1024, 64 * 1_048_576),
    shutdownGraceMs: int(env, 'SHUTDOWN_GRACE_MS', 10_000, 0, 600_000),
    headersTimeoutMs: int(env, 'HEADERS_TIMEOUT_MS', 10_000, 100, 600_000),
    requestTimeoutMs: int(env, 'REQUEST_TIMEOUT_MS', 30_000, 100, 3_600_000),
    responseTimeoutMs: int(env, 'RESPONSE_TIMEOUT_MS', 30_000, 100, 3_600_000),
    maxConnectionsPerAddress: int(env, 'MAX_CONNECTIONS_PER_ADDRESS', 256, 0, 1_000_000),
    trustProxy: trustProxy(env),
    worker: bool(env, 'WORKER', true),
    console: bool(env, 'CONSOLE', true),
    allowPrivateEgress: bool(env, 'ALLOW_PRIVATE_EGRESS', false),
    apiSpecMaxBytes: int(env, 'API_SPEC_MAX_BYTES', 4 * 1_048_576, 1024, 32 * 1_048_576),
    listMaxBytes: int(env, 'LIST_MAX_BYTES', 16 * 1_048_576, 1024, 512 * 1_048_576),
    apiSpecMaxOperations: int(env, 'API_SPEC_MAX_OPERATIONS', 5_000, 1, 1_000_000),
    apiSpecImport: Object.freeze({
      processes: int(env, 'API_SPEC_IMPORT_PROCESSES', 2, 1, 64),
      queue: int(env, 'API_SPEC_IMPORT_QUEUE', 16, 0, 10_000),
      timeoutMs: int(env, 'API_SPEC_IMPORT_TIMEOUT_MS', 20_000, 1, 600_000),
      heapMb: int(env, 'API_SPEC_IMPORT_HEAP_MB', 512, 16, 16_384),
    }),
    sweepCron: cronExpression(env, 'SWEEP_CRON', '0 3 * * *'),
    webhookMaxBodyBytes: int(env, 'WEBHOOK_MAX_BODY_BYTES', 1_048_576, 1024, 64 * 1_048_576),
    webhookRateLimit: Object.freeze({
      max: int(env, 'WEBHOOK_RATE_LIMIT_MAX', 100, 1, 1_000_000_000),
      windowSeconds: int(env, 'WEBHOOK_RATE_LIMIT_WINDOW_SECONDS', 60, 1, 86_400),
    }),
    deliveryGuardDays: int(env, 'DELIVERY_GUARD_DAYS', 7, 1, 365),
    runRetentionDays: int(env, 'RUN_RETENTION_DAYS', 30, 1, 36_500),
    quotas: Object.freeze({
      workflows: int(env, 'QUOTA_WORKFLOWS', 1_000, 1, 10_000_000),
      webhookTriggers: int(env, 'QUOTA_WEBHOOK_TRIGGERS', 2_000, 1, 10_000_000),
      webhookTriggersPerWorkflow: int(env, 'QUOTA_WEBHOOK_TRIGGERS_PER_WORKFLOW', 50, 1, 1000),
      scheduleTriggers: int(env, 'QUOTA_SCHEDULE_TRIGGERS', 200, 0, 10_000_000),
      connectors: int(env, 'QUOTA_CONNECTORS', 200, 1, 10_000_000),
      dataModels: int(env, 'QUOTA_DATA_MODELS', 500, 1, 10_000_000),
      fieldsPerDataModel: int(env, 'QUOTA_FIELDS_PER_DATA_MODEL', 500, 1, 100_000),
      waitingRuns: int(env, 'QUOTA_WAITING_RUNS', 10_000, 1, 100_000_000),
    }),
    scheduleMinIntervalSeconds: int(env, 'SCHEDULE_MIN_INTERVAL_SECONDS', 1, 1, 86_400),
    workerConcurrency: int(env, 'WORKER_CONCURRENCY', 256, 1, 1000),
    workerLeaseSeconds: int(env, 'WORKER_LEASE_SECONDS', 30, 2, 3600),
    workerPollMs: int(env, 'WORKER_POLL_MS', 1000, 10, 60_000),
    ...scheduleTicks(env),
    runMaxAttempts: int(env, 'RUN_MAX_ATTEMPTS', 5, 1, 100),
    runRetrySchedule: Object.freeze(retrySchedule(env)),
    runRetryAfterMaxMs: durationList(env, 'RUN_RETRY_AFTER_MAX', '1h', 1)[0]!,
    runMaxLeaseLosses: int(env, 'RUN_MAX_LEASE_LOSSES', 3, 1, 100),
    expressionProcesses: int(env, 'EXPRESSION_PROCESSES', Math.min(4, os.availableParallelism()), 1, 64),
    expressionMemoryMb: int(env, 'EXPRESSION_MEMORY_MB', 128, 16, 4096),
    expressionTimeoutMs: int(env, 'EXPRESSION_TIMEOUT_MS', 1000, 10, 60_000),
    testRuns: Object.freeze({
      expressionProcesses: int(env, 'TEST_RUN_EXPRESSION_PROCESSES', 1, 1, 16),
      expressionPriority: int(env, 'TEST_RUN_EXPRESSION_PRIORITY', 19, 0, 19),
      concurrency: int(env, 'TEST_RUN_CONCURRENCY', 3, 1, 100),
      max: int(env, 'TEST_RUN_RATE_MAX', 30, 1, 100_000),
      windowSeconds: int(env, 'TEST_RUN_RATE_WINDOW_SECONDS', 60, 1, 86_400),
    }),
    // The upper bounds are what an answer shows (runs/run-record.ts ANSWER_CAPS), so a
    // page of runs has a size known in advance; the steps' lower bound leaves room for 50
    // steps' previews and an error.
    runRecord: Object.freeze({
      outputBytes: int(env, 'RUN_STEP_OUTPUT_MAX_BYTES', 65_536, 1024, 262_144),
      errorBytes: int(env, 'RUN_STEP_ERROR_MAX_BYTES', 4096, 256, 16_384),
      stepsBytes: int(env, 'RUN_STEPS_MAX_BYTES', 262_144, 131_072, 262_144),
    }),
    relay: Object.freeze({
      port: relayPort,
      host: str(env, 'RELAY_HOST') ?? host,
      targetUrl: url(env, 'RELAY_TARGET_URL', ['http:', 'https:']),
      publicUrl: url(env, 'RELAY_PUBLIC_URL', ['http:', 'https:'])?.replace(/\/+$/, ''),
      clientId: relayClientId,
      clientSecret: relayClientSecret,
      credentialsFile: relayCredentialsFile === undefined ? undefined : path.resolve(relayCredentialsFile),
      upstreamTimeoutMs: int(env, 'RELAY_UPSTREAM_TIMEOUT_MS', 10_000, 100, 600_000),
      upstreamConnections: int(env, 'RELAY_UPSTREAM_CONNECTIONS', 64, 1, 10_000),
    }),
    metricsPort: str(env, 'METRICS_PORT') === undefined ? undefined : int(env, 'METRICS_PORT', 9464, 0, 65535),
    metricsHost: str(env, 'METRICS_HOST') ?? '127.0.0.1',
    metricsTenantLabels: bool(env, 'METRICS_WORKFLOW_LABELS', false)
      ? Object.freeze({ max: int(env, 'METRICS_WORKFLOW_LABELS_MAX', 500, 1, 10_000) })
      : undefined,
    tracing: tracingConfig(env),
  });
}

/** Settings the CLI needs to reach a running server. */
export interface CliConfig {
  readonly url: string;
  readonly adminToken: string | undefined;
  readonly dataDir: string;
  /** TRIBUTARY_CLIENT_ID and TRIBUTARY_CLIENT_SECRET, both or neither: the service account of the JSON:API commands. */
  readonly clientId: string | undefined;
  readonly clientSecret: string | undefined;
  /** TRIBUTARY_CREDENTIALS_FILE, else DATA_DIR/bootstrap.json: a JSON file with client_id and client_secret. */
  readonly credentialsFile: string;
}

export function loadCliConfig(env: Env = process.env): CliConfig {
  const port = int(env, 'PORT', 8080, 1, 65535);
  const dataDir = path.resolve(str(env, 'DATA_DIR') ?? '.tributary');
  const clientId = str(env, 'TRIBUTARY_CLIENT_ID');
  const clientSecret = str(env, 'TRIBUTARY_CLIENT_SECRET');
  if ((clientId === undefined) !== (clientSecret === undefined))
    throw new ConfigError(
      clientId === undefined ? 'TRIBUTARY_CLIENT_ID' : 'TRIBUTARY_CLIENT_SECRET',
      'must be set together with the other of TRIBUTARY_CLIENT_ID and TRIBUTARY_CLIENT_SECRET',
    );
  const credentialsFile = str(env, 'TRIBUTARY_CREDENTIALS_FILE');
  if (clientId !== undefined && credentialsFile !== undefined)
    throw new ConfigError(
      'TRIBUTARY_CREDENTIALS_FILE',
      'cannot be set together with TRIBUTARY_CLIENT_ID and TRIBUTARY_CLIENT_SECRET: give the account one way',
    );
  return Object.freeze({
    url: url(env, 'TRIBUTARY_URL', ['http:', 'https:']) ?? `http://127.0.0.1:${port}`,
    adminToken: str(env, 'TRIBUTARY_ADMIN_TOKEN'),
    dataDir,
    clientId,
    clientSecret,
    credentialsFile: path.resolve(credentialsFile ?? path.join(dataDir, 'bootstrap.json')),
  });
}
