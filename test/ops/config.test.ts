/**
 * Configuration: bad values stop the process with a message naming the variable; the
 * defaults are the documented ones (docs/configuration.md).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { ConfigError, loadCliConfig, loadConfig } from '../../src/config.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const NODE = path.join(ROOT, 'node_modules/.bin/node');

function rejects(env: Record<string, string>, message: string): void {
  assert.throws(
    () => loadConfig(env),
    (err: unknown) => {
      assert.ok(err instanceof ConfigError, `expected a ConfigError, got ${String(err)}`);
      assert.equal(err.message, message);
      return true;
    },
  );
}

test('bad values are refused with a message naming the variable', () => {
  rejects({ PORT: 'abc' }, 'Invalid configuration: PORT must be a whole number, got "abc"');
  rejects({ PORT: '65536' }, 'Invalid configuration: PORT must be between 0 and 65535, got 65536');
  rejects({ PORT: '-1' }, 'Invalid configuration: PORT must be a whole number, got "-1"');
  rejects({ PORT: '80.5' }, 'Invalid configuration: PORT must be a whole number, got "80.5"');
  rejects({ DATABASE_URL: 'not a url' }, 'Invalid configuration: DATABASE_URL must be a URL');
  rejects({ DATABASE_URL: 'mysql://db.example/app' }, 'Invalid configuration: DATABASE_URL must use postgres: or postgresql:');
  rejects({ TOKEN_TTL_SECONDS: '59' }, 'Invalid configuration: TOKEN_TTL_SECONDS must be between 60 and 86400, got 59');
  rejects({ TOKEN_TTL_SECONDS: '86401' }, 'Invalid configuration: TOKEN_TTL_SECONDS must be between 60 and 86400, got 86401');
  rejects({ REDIS_TIMEOUT_MS: '0' }, 'Invalid configuration: REDIS_TIMEOUT_MS must be between 10 and 60000, got 0');
  rejects({ DATABASE_CONNECT_TIMEOUT_MS: 'soon' }, 'Invalid configuration: DATABASE_CONNECT_TIMEOUT_MS must be a whole number, got "soon"');
  rejects({ TOKEN_TTL_SECONDS: '15m' }, 'Invalid configuration: TOKEN_TTL_SECONDS must be a whole number, got "15m"');
  rejects({ RUN_STEPS_MAX_BYTES: '1048576' }, 'Invalid configuration: RUN_STEPS_MAX_BYTES must be between 131072 and 262144, got 1048576');
  assert.deepEqual(loadConfig({}).runRecord, { outputBytes: 65_536, errorBytes: 4096, stepsBytes: 262_144 });
  rejects({ LOG_LEVEL: 'verbose' }, 'Invalid configuration: LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent');
  rejects({ TRIBUTARY_ADMIN_TOKEN: 'short-token' }, 'Invalid configuration: TRIBUTARY_ADMIN_TOKEN must be at least 32 characters');
  rejects({ TRIBUTARY_ADMIN_TOKEN: 'x'.repeat(31) }, 'Invalid configuration: TRIBUTARY_ADMIN_TOKEN must be at least 32 characters');
  const cron = 'Invalid configuration: SWEEP_CRON must be a 5-field cron expression (minute hour day-of-month month day-of-week, UTC)';
  rejects({ SWEEP_CRON: 'garbage' }, `${cron}, got "garbage"`);
  rejects({ SWEEP_CRON: '0 3 * *' }, `${cron}, got "0 3 * *"`);
  rejects({ SWEEP_CRON: '0 0 3 * * *' }, `${cron}, got "0 0 3 * * *"`);
  rejects({ SWEEP_CRON: '0 0 3 * * * 2027' }, `${cron}, got "0 0 3 * * * 2027"`);
  rejects({ SWEEP_CRON: '@daily' }, `${cron}, got "@daily"`);
  rejects({ SWEEP_CRON: '60 3 * * *' }, `${cron}, got "60 3 * * *"`);
  rejects({ SWEEP_CRON: '0 24 * * *' }, `${cron}, got "0 24 * * *"`);
  rejects({ SWEEP_CRON: '0 3 * 13 *' }, `${cron}, got "0 3 * 13 *"`);
  rejects({ SWEEP_CRON: '0 0 30 2 *' }, `${cron} that matches some date, got "0 0 30 2 *"`);
  rejects({ REDIS_URL: 'http://cache.example' }, 'Invalid configuration: REDIS_URL must use redis: or rediss:');
  rejects({ IDEMPOTENCY_TTL: '59' }, 'Invalid configuration: IDEMPOTENCY_TTL must be between 60 and 2592000, got 59');
  rejects({ WORKER: 'maybe' }, 'Invalid configuration: WORKER must be true or false, got "maybe"');
  rejects({ LOG_FORMAT: 'text' }, 'Invalid configuration: LOG_FORMAT must be json or pretty, got "text"');
  rejects(
    { RELAY_CLIENT_ID: 'abc' },
    'Invalid configuration: RELAY_CLIENT_SECRET must be set together with the other of RELAY_CLIENT_ID and RELAY_CLIENT_SECRET',
  );
  rejects(
    { RELAY_CLIENT_SECRET: 'tbcs_x' },
    'Invalid configuration: RELAY_CLIENT_ID must be set together with the other of RELAY_CLIENT_ID and RELAY_CLIENT_SECRET',
  );
  rejects(
    { RELAY_CLIENT_ID: 'abc', RELAY_CLIENT_SECRET: 'tbcs_x', RELAY_CREDENTIALS_FILE: '/tmp/c.json' },
    'Invalid configuration: RELAY_CREDENTIALS_FILE cannot be set together with RELAY_CLIENT_ID and RELAY_CLIENT_SECRET: give the account one way',
  );
  rejects({ RELAY_TARGET_URL: 'ftp://x' }, 'Invalid configuration: RELAY_TARGET_URL must use http: or https:');
  rejects({ RELAY_PUBLIC_URL: 'hooks.example.com' }, 'Invalid configuration: RELAY_PUBLIC_URL must be a URL');
  rejects({ RELAY_PORT: '70000' }, 'Invalid configuration: RELAY_PORT must be between 0 and 65535, got 70000');
  const trust = "Invalid configuration: TRUST_PROXY must be comma-separated addresses, CIDR ranges, loopback, linklocal or uniquelocal (the balancer's)";
  rejects({ TRUST_PROXY: 'true' }, `${trust}, got "true"`);
  rejects({ TRUST_PROXY: '10.0.0.0/33' }, `${trust}, got "10.0.0.0/33"`);
  rejects({ TRUST_PROXY: '127.0.0.1, balancer' }, `${trust}, got "balancer"`);
  rejects({ TRUST_PROXY: '2' }, `${trust}, got "2"`);
  assert.equal(loadConfig({}).trustProxy, false);
  assert.deepEqual(loadConfig({ TRUST_PROXY: '10.0.0.0/8, fd00::/8,loopback' }).trustProxy, ['10.0.0.0/8', 'fd00::/8', 'loopback']);
  assert.equal(loadConfig({}).relay.port, undefined);
  assert.equal(loadConfig({ HOST: '0.0.0.0' }).relay.host, '0.0.0.0');
});

test('OpenTelemetry settings: the endpoint turns tracing on, bad values stop the process, header values are never quoted', () => {
  assert.equal(loadConfig({}).tracing, undefined);
  assert.deepEqual(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }).tracing, {
    url: 'http://collector:4318/v1/traces',
    serviceName: 'tributary',
    headers: {},
  });
  assert.equal(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'https://otlp.example/base/' }).tracing?.url, 'https://otlp.example/base/v1/traces');
  // The signal's own endpoint is used as given, and wins.
  assert.equal(
    loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://b:4318/custom' }).tracing?.url,
    'http://b:4318/custom',
  );
  const c = loadConfig({
    OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318',
    OTEL_SERVICE_NAME: 'tributary-eu',
    OTEL_EXPORTER_OTLP_HEADERS: 'X-Api-Key=abc%3D%3D, x-tenant = eu',
    OTEL_EXPORTER_OTLP_TRACES_HEADERS: 'x-tenant=traces',
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
  }).tracing;
  assert.equal(c?.serviceName, 'tributary-eu');
  assert.deepEqual(c?.headers, { 'x-api-key': 'abc==', 'x-tenant': 'traces' });
  assert.equal(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_SDK_DISABLED: 'true' }).tracing, undefined);

  rejects({ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' }, 'Invalid configuration: OTEL_EXPORTER_OTLP_ENDPOINT must use http: or https:');
  rejects({ OTEL_EXPORTER_OTLP_ENDPOINT: 'not a url' }, 'Invalid configuration: OTEL_EXPORTER_OTLP_ENDPOINT must be a URL');
  rejects(
    { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://user:pw@otlp.example/v1/traces' },
    'Invalid configuration: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT must not hold credentials: give them in OTEL_EXPORTER_OTLP_HEADERS',
  );
  rejects(
    { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4317', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' },
    'Invalid configuration: OTEL_EXPORTER_OTLP_PROTOCOL must be http/json or http/protobuf (spans are sent as OTLP/HTTP JSON; gRPC is not supported: use the collector\'s HTTP port, 4318), got "grpc"',
  );
  rejects(
    { OTEL_EXPORTER_OTLP_HEADERS: 'x-api-key=secret-value,novalue' },
    'Invalid configuration: OTEL_EXPORTER_OTLP_HEADERS entry 2 must be name=value with a header name before the =',
  );
  rejects(
    { OTEL_EXPORTER_OTLP_HEADERS: 'bad name=secret-value' },
    'Invalid configuration: OTEL_EXPORTER_OTLP_HEADERS entry 1 must be name=value with a header name before the =',
  );
  rejects(
    { OTEL_EXPORTER_OTLP_HEADERS: 'x-api-key=secret%zz' },
    'Invalid configuration: OTEL_EXPORTER_OTLP_HEADERS entry 1 (x-api-key) has a malformed percent-encoding',
  );
  rejects(
    { OTEL_EXPORTER_OTLP_TRACES_HEADERS: 'x-api-key=secret%0Avalue' },
    'Invalid configuration: OTEL_EXPORTER_OTLP_TRACES_HEADERS entry 1 (x-api-key) must not hold line breaks or NUL',
  );
  rejects({ OTEL_SERVICE_NAME: 'x'.repeat(256) }, 'Invalid configuration: OTEL_SERVICE_NAME must be at most 255 characters');
  rejects({ OTEL_SDK_DISABLED: 'perhaps' }, 'Invalid configuration: OTEL_SDK_DISABLED must be true or false, got "perhaps"');
});

test('good values are taken as given', () => {
  const c = loadConfig({
    PORT: '0',
    DATABASE_URL: 'postgresql://u@db.example:5432/app',
    TOKEN_TTL_SECONDS: '60',
    LOG_LEVEL: 'debug',
    TRIBUTARY_ADMIN_TOKEN: 'x'.repeat(32),
    SWEEP_CRON: ' 30  2 * *   1-5 ',
  });
  assert.equal(c.port, 0);
  assert.equal(c.databaseUrl, 'postgresql://u@db.example:5432/app');
  assert.equal(c.tokenTtlSeconds, 60);
  assert.equal(c.logLevel, 'debug');
  assert.equal(loadConfig({ LOG_FORMAT: 'pretty' }, false).logFormat, 'pretty');
  assert.equal(loadConfig({ LOG_FORMAT: 'JSON' }, true).logFormat, 'json');
  assert.equal(c.adminToken, 'x'.repeat(32));
  assert.equal(c.sweepCron, '30 2 * * 1-5', 'whitespace is normalized');
});

test('defaults are the documented ones', () => {
  const c = loadConfig({});
  assert.equal(c.port, 8080);
  assert.equal(c.host, '127.0.0.1');
  assert.equal(c.databaseUrl, undefined);
  assert.equal(c.databasePoolSize, 10);
  assert.equal(c.databaseConnectTimeoutMs, 5000);
  assert.equal(c.redisUrl, undefined);
  assert.equal(c.redisTimeoutMs, 500);
  assert.equal(c.dataDir, path.resolve('.tributary'));
  assert.equal(c.tokenTtlSeconds, 900);
  assert.equal(c.idempotencyTtlSeconds, 86_400);
  assert.deepEqual(c.rateLimit, { max: 600, windowSeconds: 60 });
  assert.equal(c.bodyLimitBytes, 1_048_576);
  assert.equal(c.logLevel, 'info');
  assert.equal(loadConfig({}, false).logFormat, 'json', 'JSON lines when stdout is not a terminal');
  assert.equal(loadConfig({}, true).logFormat, 'pretty', 'readable lines on a terminal');
  assert.equal(c.adminToken, undefined);
  assert.equal(c.shutdownGraceMs, 10_000);
  assert.equal(c.worker, true);
  assert.equal(c.sweepCron, '0 3 * * *');
  // Blank counts as unset.
  assert.equal(loadConfig({ PORT: '  ', LOG_LEVEL: '' }).port, 8080);
  assert.equal(loadConfig({ SWEEP_CRON: '' }).sweepCron, '0 3 * * *');
  assert.equal(loadConfig({ SWEEP_CRON: '   ' }).sweepCron, '0 3 * * *');

  const cli = loadCliConfig({});
  assert.deepEqual(
    { ...cli },
    {
      url: 'http://127.0.0.1:8080',
      adminToken: undefined,
      dataDir: path.resolve('.tributary'),
      clientId: undefined,
      clientSecret: undefined,
      credentialsFile: path.resolve('.tributary/bootstrap.json'),
    },
  );
  assert.equal(loadCliConfig({ PORT: '9090' }).url, 'http://127.0.0.1:9090');
  assert.equal(loadCliConfig({ PORT: '9090', TRIBUTARY_URL: 'https://tributary.example' }).url, 'https://tributary.example');
  assert.throws(() => loadCliConfig({ TRIBUTARY_URL: 'ftp://x' }), {
    name: 'ConfigError',
    message: 'Invalid configuration: TRIBUTARY_URL must use http: or https:',
  });
});

function run(args: string[], env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  const base: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!/^(TRIBUTARY_|PORT$|DATA_DIR$|DATABASE_URL$|REDIS_URL$|LOG_LEVEL$)/.test(k)) base[k] = v;
  return new Promise((resolve, reject) => {
    execFile(NODE, ['src/main.ts', ...args], { cwd: ROOT, env: { ...base, ...env }, timeout: 60_000 }, (err, stdout, stderr) => {
      if (err && typeof (err as { code?: unknown }).code !== 'number') return reject(err);
      resolve({ code: err ? (err as { code: number }).code : 0, stdout, stderr });
    });
  });
}

test('the CLI exits 78 naming the variable', async () => {
  const [migrate, sweep] = await Promise.all([run(['migrate'], { PORT: 'abc' }), run(['sweep', '--json'], { PORT: 'abc' })]);
  assert.equal(migrate.code, 78);
  assert.equal(migrate.stdout, '');
  assert.equal(migrate.stderr, 'error: Invalid configuration: PORT must be a whole number, got "abc"\n');
  // An admin command reads PORT for its default URL: same failure, as one JSON document.
  assert.equal(sweep.code, 78);
  assert.deepEqual(JSON.parse(sweep.stdout), { error: 'Invalid configuration: PORT must be a whole number, got "abc"', status: null, code: 'config_error' });
});

test('METRICS_HOST is 127.0.0.1 unless set, whatever HOST is: the scrape has no token', () => {
  assert.equal(loadConfig({}).metricsHost, '127.0.0.1');
  assert.equal(loadConfig({ HOST: '0.0.0.0' }).metricsHost, '127.0.0.1');
  assert.equal(loadConfig({ HOST: '0.0.0.0', METRICS_HOST: '10.0.0.5' }).metricsHost, '10.0.0.5');
});

test('METRICS_WORKFLOW_LABELS opts in to workflow and connector labels, capped by METRICS_WORKFLOW_LABELS_MAX', () => {
  assert.equal(loadConfig({}).metricsTenantLabels, undefined);
  assert.deepEqual(loadConfig({ METRICS_WORKFLOW_LABELS: 'true' }).metricsTenantLabels, { max: 500 });
  assert.deepEqual(loadConfig({ METRICS_WORKFLOW_LABELS: 'true', METRICS_WORKFLOW_LABELS_MAX: '20' }).metricsTenantLabels, { max: 20 });
  assert.throws(() => loadConfig({ METRICS_WORKFLOW_LABELS: 'true', METRICS_WORKFLOW_LABELS_MAX: '0' }), /METRICS_WORKFLOW_LABELS_MAX/);
  assert.throws(() => loadConfig({ METRICS_WORKFLOW_LABELS: 'true', METRICS_WORKFLOW_LABELS_MAX: '10001' }), /METRICS_WORKFLOW_LABELS_MAX/);
});
