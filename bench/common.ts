/**
 * What the benchmark scripts share: settings from the environment, one engine's run (its
 * scratch database, data directory and app), a tenant to measure with, CPU figures, one
 * measured autocannon run, and the writing of docs/.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import { sql } from 'kysely';
import * as admin from '../src/admin/service.ts';
import { buildApp } from '../src/app.ts';
import type { Scope } from '../src/auth/tokens.ts';
import { loadConfig } from '../src/config.ts';
import type { Db } from '../src/db/connect.ts';
import type { FieldType } from '../src/db/tables.ts';
import { uuidv7 } from '../src/ids.ts';
import { closeDeps, createDeps, type Deps } from '../src/deps.ts';
import { startProfile, type SelfTime } from './profile.ts';
import { freshPostgres, pgliteTemplate, type ScratchPostgres } from '../test/helpers/databases.ts';

export { freePort } from '../test/helpers/cli.ts';

export function intEnv(name: string, def: number, min: number, max: number): number {
  const v = process.env[name];
  if (v === undefined || v.trim() === '') return def;
  const n = Number(v);
  if (!Number.isInteger(n) || n < min || n > max) throw new Error(`${name} must be a whole number between ${min} and ${max}`);
  return n;
}

export function redact(u: string): string {
  try {
    const url = new URL(u);
    if (url.password) url.password = '***';
    return url.toString();
  } catch {
    return '(unparsable URL)';
  }
}

/** A migrated scratch database `<prefix>_<random>` on the server of `baseUrl`, or why not. */
async function scratchPostgres(baseUrl: string, prefix: string): Promise<ScratchPostgres | { skip: string }> {
  try {
    return await freshPostgres(baseUrl, prefix);
  } catch (err) {
    return { skip: `no scratch database on PostgreSQL at ${redact(baseUrl)}: ${(err as Error).message}` };
  }
}

export const DEFAULT_PG = 'postgres://postgres@127.0.0.1:5432/postgres';

/**
 * The database of one engine's run: on PostgreSQL a scratch database `<prefix>_<random>` on
 * the server of BENCH_DATABASE_URL / DATABASE_URL / DEFAULT_PG, its URL put into
 * `vars.DATABASE_URL`, with the server version and a drop for the end; on PGlite nothing to
 * create. `skip` says why PostgreSQL cannot be used.
 */
export async function engineDatabase(
  engine: 'pglite' | 'postgres',
  prefix: string,
  vars: Record<string, string>,
): Promise<{ version: string | undefined; drop: () => Promise<void> } | { skip: string }> {
  if (engine === 'pglite') return { version: undefined, drop: async () => {} };
  const fresh = await scratchPostgres(process.env.BENCH_DATABASE_URL || process.env.DATABASE_URL || DEFAULT_PG, prefix);
  if ('skip' in fresh) return fresh;
  vars.DATABASE_URL = fresh.url;
  return { version: fresh.version, drop: fresh.drop };
}

export function sh(cmd: string, args: string[]): string {
  try {
    return execFileSync(cmd, args, { encoding: 'utf8', timeout: 5000 }).trimEnd();
  } catch {
    return '(unavailable)';
  }
}

export function machine() {
  let cpu = '(unknown)';
  try {
    cpu = /^model name\s*:\s*(.+)$/m.exec(fs.readFileSync('/proc/cpuinfo', 'utf8'))?.[1]?.trim() ?? cpu;
  } catch {
    // not Linux
  }
  return { nproc: sh('nproc', []), free: sh('free', ['-h']), node: process.version, cpu, os: `${os.type()} ${os.release()} ${os.arch()}` };
}

/**
 * Settings for an app under benchmark: silent logs, no worker, and rate windows (per
 * account, per client address) that still run but can never reject.
 */
export function benchEnv(dataDir: string): Record<string, string> {
  return {
    DATA_DIR: dataDir,
    TRIBUTARY_ADMIN_TOKEN: `tbadm_${randomBytes(32).toString('base64url')}`,
    LOG_LEVEL: 'silent',
    PORT: '0',
    RATE_LIMIT_MAX: '1000000',
    RATE_LIMIT_WINDOW_SECONDS: '1',
    TOKEN_RATE_LIMIT_MAX: '1000000000',
    TOKEN_RATE_LIMIT_WINDOW_SECONDS: '1',
    WORKER: 'false',
  };
}

/** Ends the process (exit 1) if the benchmark `name` still runs after `ms`: a hung step must not hold the machine. */
export function watchdog(name: string, ms: number): void {
  setTimeout(() => {
    console.error(`${name}: still running after ${Math.round(ms / 1000)} s; giving up`);
    process.exit(1);
  }, ms).unref();
}

export const ENGINES = (process.env.BENCH_ENGINES ?? 'pglite,postgres').split(',').map((x) => x.trim());

/**
 * The driver of the bench scripts: each engine of BENCH_ENGINES in turn, its notes
 * printed, then the report written (unless BENCH_NO_WRITE=1) with the start time and the
 * load average before the run; exits 0, or 1 with the error.
 */
export function runBench<R extends { notes: string[] }>(
  benchEngine: (engine: Engine) => Promise<R>,
  write: (reports: R[], started: Date, loadBefore: string) => void,
): void {
  const main = async () => {
    const started = new Date();
    const loadBefore = loadAverage();
    const reports: R[] = [];
    for (const engine of ['pglite', 'postgres'] as const) {
      if (!ENGINES.includes(engine)) continue;
      const report = await benchEngine(engine);
      for (const n of report.notes) console.log(`  ${n}`);
      reports.push(report);
    }
    if (process.env.BENCH_NO_WRITE !== '1') write(reports, started, loadBefore);
  };
  main().then(
    () => process.exit(0),
    (err) => {
      console.error(err);
      process.exit(1);
    },
  );
}

const CLK_TCK = Number(sh('getconf', ['CLK_TCK'])) || 100;

/** Busy (non-idle, non-iowait) CPU time of the whole machine so far, from /proc/stat. */
export function machineBusyMicros(): number | undefined {
  try {
    const line = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0]!;
    const [user, nice, system, _idle, _iowait, irq, softirq, steal] = line.trim().split(/\s+/).slice(1).map(Number);
    return ((user! + nice! + system! + irq! + softirq! + steal!) * 1e6) / CLK_TCK;
  } catch {
    return undefined;
  }
}

/** CPU time (user + system) of a process so far, from /proc. */
export function procCpuMicros(pid: number): number | undefined {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(f[11]) + Number(f[12])) * 1e6) / CLK_TCK;
  } catch {
    return undefined;
  }
}

/** A field of /proc/PID/status in KiB (VmRSS, VmHWM), or undefined once the process is gone. */
export function procKiB(pid: number, field: 'VmRSS' | 'VmHWM'): number | undefined {
  try {
    const m = new RegExp(`^${field}:\\s+(\\d+) kB$`, 'm').exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}

/** Stops a child `serve` (SIGTERM) and waits for it to exit. */
export async function stopChild(child: ChildProcess): Promise<void> {
  child.kill('SIGTERM');
  await new Promise((r) => (child.exitCode !== null ? r(undefined) : child.once('exit', r)));
}

/** Waits until a child `serve` is ready: /readyz 200 (or it exits). */
export async function waitHealthy(url: string, child: ChildProcess): Promise<void> {
  for (let i = 0; i < 600; i++) {
    if (child.exitCode !== null) throw new Error(`serve exited with ${child.exitCode}`);
    try {
      if ((await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(1000) })).ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('serve was not ready (/readyz) within 60 s');
}

export type Engine = 'pglite' | 'postgres';

/** A number for a report: grouped thousands, `digits` decimals; 'n/a' when there is none. */
export function fmt(n: number | undefined, digits = 0): string {
  if (n === undefined || !Number.isFinite(n)) return 'n/a';
  return n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

export const pct = (r: number | undefined) => (r === undefined ? 'n/a' : `${fmt(r * 100, 0)}%`);

/** The load average, 1 / 5 / 15 min. */
export const loadAverage = () =>
  os
    .loadavg()
    .map((n) => n.toFixed(2))
    .join(' / ');

// ---------------------------------------------------------------------------------------
// One engine's run

export interface EngineRun {
  /** A fresh temporary directory, removed at the end. */
  dir: string;
  /** The app's settings: benchEnv's (or the `vars` option's), with DATABASE_URL on PostgreSQL. */
  vars: Record<string, string>;
  /** The PostgreSQL server's version; undefined on PGlite. */
  version: string | undefined;
  /**
   * Has `close` run at the end, before the database is dropped (the last deferred first);
   * the returned function runs it sooner, and then not again.
   */
  defer(what: string, close: () => unknown): () => Promise<void>;
}

/**
 * One engine's run of a benchmark: a temporary directory, the app's settings, a scratch
 * database `<prefix>_<random>` on PostgreSQL (kept with BENCH_KEEP_DB=1), then `body`; at
 * the end what it deferred is closed, the database dropped and the directory removed.
 * Where PostgreSQL cannot be used, `skipped` builds the report from the reason.
 */
export async function withEngine<R>(
  engine: Engine,
  options: { prefix: string; vars?: (dir: string) => Record<string, string>; skipped: (note: string) => R },
  body: (run: EngineRun) => Promise<R>,
): Promise<R> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `${options.prefix.replaceAll('_', '-')}-`));
  const vars = options.vars ? options.vars(dir) : benchEnv(dir);
  const db = await engineDatabase(engine, options.prefix, vars);
  if ('skip' in db) {
    fs.rmSync(dir, { recursive: true, force: true });
    return options.skipped(`Skipped: ${db.skip}.`);
  }
  const closers: Array<() => Promise<void>> = [];
  const defer = (what: string, close: () => unknown) => {
    let done = false;
    const once = async () => {
      if (done) return;
      done = true;
      await (async () => close())().catch((err: unknown) => console.error(`closing ${what}:`, err));
    };
    closers.push(once);
    return once;
  };
  try {
    return await body({ dir, vars, version: db.version, defer });
  } finally {
    for (const close of closers.reverse()) await close();
    if (process.env.BENCH_KEEP_DB === '1' && vars.DATABASE_URL) console.log(`  kept ${vars.DATABASE_URL} (BENCH_KEEP_DB=1): drop it yourself`);
    else await db.drop().catch((err: unknown) => console.error('dropping the bench database:', err));
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** The app's dependencies for a run (PGlite: in memory, from the migrated template), closed at its end. */
export async function runDeps(run: EngineRun): Promise<Deps> {
  const config = loadConfig(run.vars);
  const deps = config.databaseUrl
    ? await createDeps(config, { dataDir: run.dir })
    : await createDeps(config, { dataDir: 'memory', initialDump: await pgliteTemplate() });
  run.defer('deps', () => closeDeps(deps));
  return deps;
}

/** The app in this process on a free loopback port, over the run's deps; `close` stops it sooner than the run's end. */
export async function runApp(run: EngineRun): Promise<{ deps: Deps; url: string; close: () => Promise<void> }> {
  const deps = await runDeps(run);
  const app = await buildApp(deps);
  const close = run.defer('the app', () => app.close());
  return { deps, url: await app.listen({ host: '127.0.0.1', port: 0 }), close };
}

/** What a report says of an engine whose app runs in this process. */
export const inProcessDetail = (engine: Engine, version: string | undefined) =>
  engine === 'postgres'
    ? `PostgreSQL ${version} on loopback (pg.Pool, ${loadConfig({}).databasePoolSize} connections)`
    : 'PGlite (embedded, in memory, one connection)';

/** A bearer token for a service account, from the token endpoint at `url`. */
export async function exchangeToken(url: string, clientId: string, clientSecret: string): Promise<string> {
  const res = await fetch(`${url}/api/v1/oauth/token`, {
    method: 'POST',
    body: new URLSearchParams({ grant_type: 'client_credentials', client_id: clientId, client_secret: clientSecret }),
    signal: AbortSignal.timeout(10_000),
  });
  if (res.status !== 200) throw new Error(`token exchange failed: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { access_token: string }).access_token;
}

/** A JSON:API POST to `${url}/api/json/v1${p}` that must answer 201, and its document. */
export async function postJsonApi<T = { data: { id: string } }>(url: string, token: string, p: string, body: unknown): Promise<T> {
  const res = await fetch(`${url}/api/json/v1${p}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/vnd.api+json', accept: 'application/vnd.api+json' },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(10_000),
  });
  const text = await res.text();
  if (res.status !== 201) throw new Error(`POST ${p}: ${res.status} ${text}`);
  return JSON.parse(text) as T;
}

export interface WebhookWorkflow {
  /** The workflow's name. */
  name: string;
  /** The steps, as the builder state's `step_params`. */
  steps: unknown[];
  /** The service account the `hook` trigger selects. */
  serviceAccountId: string;
  organizationId: string;
  /** An inbound connector that verifies the trigger's deliveries. */
  inboundConnectorId?: string;
}

/** Saves an active workflow with one webhook trigger keyed `hook`; answers its id and trigger token. */
export async function saveWebhookWorkflow(url: string, bearer: string, w: WebhookWorkflow): Promise<{ workflowId: string; token: string }> {
  const trigger = {
    key: 'hook',
    type: 'webhook',
    service_account_id: w.serviceAccountId,
    ...(w.inboundConnectorId ? { inbound_connector_id: w.inboundConnectorId } : {}),
  };
  const saved = await postJsonApi<{ data: { id: string }; meta?: { trigger_tokens?: Record<string, string> } }>(url, bearer, '/workflows/save_builder_state', {
    data: {
      type: 'workflow_builder_state',
      attributes: {
        is_new_version: false,
        organization_id: w.organizationId,
        wf_params: { name: w.name, is_active: true },
        trigger_params: [trigger],
        step_params: w.steps,
      },
    },
  });
  const token = saved.meta?.trigger_tokens?.hook;
  if (!token) throw new Error('the saved workflow returned no trigger token');
  return { workflowId: saved.data.id, token };
}

/** A tenant to measure with: an organization, its workspace, an owner, and a service account with `scopes`. */
export async function seedTenant(db: Db, scopes: Scope[]) {
  const tag = randomBytes(4).toString('hex');
  const org = await admin.createOrganization(db, { name: `Bench ${tag}`, domain: `bench-${tag}.example` });
  const ws = await admin.createWorkspace(db, { organization_id: org.id, name: 'Main' });
  const user = await admin.createUser(db, { email: `bench-${tag}@example.com` });
  const member = await admin.addMember(db, { organization_id: org.id, user_id: user.id, role: 'owner' });
  const cred = await admin.createCredential(db, { workspace_id: ws.id, run_as_membership_id: member.id, name: 'bench', scopes });
  return { org, ws, cred };
}

// ---------------------------------------------------------------------------------------
// CPU over a measured window

/** pid -> CPU microseconds so far, of the PostgreSQL backends serving a database. */
export type DbCpuProbe = () => Promise<Map<number, number> | undefined>;

/**
 * When PostgreSQL runs on this machine (its backends' pids are visible in /proc), the CPU
 * of the client backends connected to `db`'s database; otherwise undefined.
 */
export function postgresCpuProbe(db: Db): DbCpuProbe {
  return async () => {
    const { rows } = await sql<{
      pid: number;
    }>`select pid from pg_stat_activity where datname = current_database() and backend_type = 'client backend'`.execute(db);
    const out = new Map<number, number>();
    for (const { pid } of rows) {
      let comm = '';
      try {
        comm = fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
      } catch {
        // not local
      }
      if (comm !== 'postgres') return undefined;
      const t = procCpuMicros(pid);
      if (t !== undefined) out.set(pid, t);
    }
    return out.size > 0 ? out : undefined;
  };
}

/** The backends' CPU between two probes. */
export function backendMicros(db0: Map<number, number> | undefined, db1: Map<number, number> | undefined): number | undefined {
  if (!db0 || !db1) return undefined;
  let micros = 0;
  // A backend that was not there at the start was born during the window: all its time counts.
  // (One that ended during it is not seen: its last figures are gone with it.)
  for (const [pid, t1] of db1) micros += t1 - (db0.get(pid) ?? 0);
  return micros;
}

export interface CpuFigures {
  /** Round trips counted by `trips` over the window (0 without it). */
  trips: number;
  /** CPU of this thread (the servers' event loop; with PGlite also the database). */
  threadMicros: number;
  dbMicros: number | undefined;
  /** Busy CPU of everything else on the machine, as a share of all cores. */
  otherLoad: number | undefined;
  wallMicros: number;
}

/** Starts the CPU counters (and `trips`, a running count of round trips); the returned function stops them. */
export async function cpuWindow(probe: DbCpuProbe | undefined, trips: () => number = () => 0): Promise<() => Promise<CpuFigures>> {
  const db0 = await probe?.();
  const machine0 = machineBusyMicros();
  const proc0 = process.cpuUsage();
  const thread0 = process.threadCpuUsage();
  const trips0 = trips();
  const t0 = performance.now();
  return async () => {
    const tripCount = trips() - trips0;
    const thread = process.threadCpuUsage(thread0);
    const proc = process.cpuUsage(proc0);
    const machine1 = machineBusyMicros();
    const wallMicros = (performance.now() - t0) * 1000;
    const dbMicros = backendMicros(db0, await probe?.());
    // All busy CPU minus this process (servers and load generator) minus our backends.
    const otherLoad =
      machine0 !== undefined && machine1 !== undefined
        ? Math.max(0, machine1 - machine0 - proc.user - proc.system - (dbMicros ?? 0)) / (wallMicros * os.availableParallelism())
        : undefined;
    return { trips: tripCount, threadMicros: thread.user + thread.system, dbMicros, otherLoad, wallMicros };
  };
}

// ---------------------------------------------------------------------------------------
// One measured autocannon run

export interface Measured {
  scenario: string;
  rps: number;
  p50: number;
  p99: number;
  total: number;
  non2xx: number;
  errors: number;
  /** CPU time of the server's thread (this process's main thread) per request, in microseconds. */
  cpuUs: number;
  /** CPU time of the PostgreSQL backends serving the app per request (local server only). */
  dbCpuUs: number | undefined;
  /** Round trips per request, where they are counted. */
  tripsPerReq: number | undefined;
  /** Busy CPU of everything else on the machine during the run, as a share of all cores. */
  otherLoad: number | undefined;
  /** How much `made` grew over the measured run, where it is given. */
  made: number | undefined;
  /** The top self-time functions of the server thread over the run (BENCH_CPU_PROFILE=N). */
  profile?: SelfTime[] | undefined;
}

export interface MeasureSettings {
  connections: number;
  warmup: number;
  duration: number;
  probe?: DbCpuProbe | undefined;
  /** A running count of round trips. */
  trips?: () => number;
  /** A count read before and after the measured run (runs made, for example). */
  made?: () => Promise<number>;
}

/**
 * One warm-up run (discarded), then the measured run. Besides autocannon's figures, the
 * CPU time of this thread per request: unlike req/s it hardly moves when other processes
 * compete for the cores.
 */
export async function measure(scenario: string, opts: autocannon.Options, settings: MeasureSettings): Promise<Measured> {
  const base: autocannon.Options = { connections: settings.connections, pipelining: 1, timeout: 10, workers: 1, ...opts };
  await autocannon({ ...base, duration: settings.warmup });
  const before = await settings.made?.();
  const stop = await cpuWindow(settings.probe, settings.trips);
  const stopProfile = await startProfile(scenario);
  const r = await autocannon({ ...base, duration: settings.duration });
  const w = await stop();
  const profile = await stopProfile();
  const made = before === undefined ? undefined : (await settings.made!()) - before;
  const n = r.requests.total;
  const row: Measured = {
    scenario,
    rps: r.requests.mean,
    p50: r.latency.p50,
    p99: r.latency.p99,
    total: n,
    non2xx: r.non2xx,
    errors: r.errors + r.timeouts,
    cpuUs: n > 0 ? w.threadMicros / n : 0,
    dbCpuUs: w.dbMicros !== undefined && n > 0 ? w.dbMicros / n : undefined,
    tripsPerReq: settings.trips && n > 0 ? w.trips / n : undefined,
    otherLoad: w.otherLoad,
    made,
    profile,
  };
  console.log(
    `  ${scenario.padEnd(52)} ${fmt(row.rps).padStart(7)} req/s  p50 ${fmt(row.p50, 1).padStart(5)} ms  p99 ${fmt(row.p99, 1).padStart(6)} ms  ${fmt(row.cpuUs).padStart(5)} us CPU/req` +
      (row.dbCpuUs === undefined ? '' : `  PG ${fmt(row.dbCpuUs).padStart(4)} us CPU/req`) +
      (row.tripsPerReq === undefined ? '' : `  ${fmt(row.tripsPerReq, 2)} trips/req`) +
      (row.otherLoad === undefined ? '' : `  other load ${pct(row.otherLoad)}`) +
      (made === undefined ? '' : `  made ${fmt(made)}`) +
      (row.non2xx || row.errors ? `  (non-2xx ${row.non2xx}, errors ${row.errors})` : ''),
  );
  for (const p of profile ?? []) console.log(`      ${(p.share * 100).toFixed(1).padStart(5)}%  ${p.name}`);
  return row;
}

// ---------------------------------------------------------------------------------------
// docs/

export const ROOT = path.resolve(import.meta.dirname, '..');

/** A run's heading at `level` (`## Run 2026-11-01T10:00:00Z`). */
export const runHeading = (level: number, started: Date) => `${'#'.repeat(level)} Run ${started.toISOString().replace(/\.\d+Z$/, 'Z')}`;

/** The machine a run was taken on, for its section. */
export function machineLine(): string {
  const m = machine();
  return `Machine: ${m.nproc} CPUs (\`nproc\`), CPU model \`${m.cpu}\`, ${m.os}, Node ${m.node}.`;
}

/** The machine's memory, as `free -h` shows it, in a fenced block. */
export const freeBlock = () => ['```', '$ free -h', machine().free, '```'];

export function writeDoc(file: string, text: string): void {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, text);
  console.log(`wrote ${path.relative(ROOT, file)}`);
}

/**
 * Writes one benchmark's `## title` section of a shared document: the intro is replaced,
 * the new run goes above the section's earlier runs (`### Run` headings), and a reading of
 * the figures written by hand above the runs (`**Reading`) stays where it is. A new
 * section goes before the first of `before` that the document holds, else at its end.
 */
export function writeSection(file: string, title: string, intro: string, runText: string, before: string[]): void {
  const existing = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '# Benchmarks\n';
  let head: string;
  let tail: string;
  let olderRuns = '';
  let reading = '';
  const at = existing.indexOf(`\n${title}`);
  if (at >= 0) {
    const next = existing.indexOf('\n## ', at + 1);
    const end = next >= 0 ? next + 1 : existing.length;
    const old = existing.slice(at + 1, end);
    const firstRun = old.indexOf('\n### Run ');
    if (firstRun >= 0) olderRuns = old.slice(firstRun + 1).trimEnd() + '\n';
    const r = old.indexOf('\n**Reading');
    if (r >= 0 && (firstRun < 0 || r < firstRun)) reading = `${old.slice(r + 1, firstRun >= 0 ? firstRun + 1 : old.length).trimEnd()}\n\n`;
    head = existing.slice(0, at + 1);
    tail = existing.slice(end);
  } else {
    const place = before.map((marker) => existing.indexOf(`\n${marker}`)).find((i) => i >= 0);
    head = place !== undefined ? existing.slice(0, place + 1) : existing.trimEnd() + '\n\n';
    tail = place !== undefined ? existing.slice(place + 1) : '';
  }
  const section = `${intro}\n${reading}${runText.trimEnd()}\n${olderRuns ? `\n${olderRuns}` : ''}`;
  writeDoc(file, `${head}${section}${tail ? `\n${tail}` : ''}`);
}

/** A data model with these fields, written straight into the tables (a bench's load bypasses the API). */
export async function insertBenchModel(
  db: Db,
  orgId: string,
  wsId: string,
  slug: string,
  fields: Array<{ name: string; type: FieldType; is_primary_key: boolean; is_required: boolean }>,
): Promise<{ id: string; fieldIds: Map<string, string> }> {
  const id = uuidv7();
  await db
    .insertInto('data_models')
    .values({ id, organization_id: orgId, workspace_id: wsId, name: slug, slug, description: 'benchmark', retention_days: null })
    .execute();
  const rows = await db
    .insertInto('data_model_fields')
    .values(
      fields.map((f) => ({
        id: uuidv7(),
        organization_id: orgId,
        workspace_id: wsId,
        data_model_id: id,
        label: f.name,
        description: null,
        constraints: null,
        ...f,
      })),
    )
    .returning(['id', 'name'])
    .execute();
  return { id, fieldIds: new Map(rows.map((r) => [r.name, r.id])) };
}

// ---------------------------------------------------------------------------------------
// Latency of a query run one at a time

export interface LatencyStats {
  p50: number;
  p95: number;
  n: number;
}

/** p50 and p95 of samples (ms), nearest rank. */
export function latencyStats(xs: number[]): LatencyStats {
  const s = [...xs].sort((a, b) => a - b);
  return { p50: s[Math.floor(s.length / 2)]!, p95: s[Math.min(s.length - 1, Math.ceil(s.length * 0.95) - 1)]!, n: s.length };
}

/** Two warm-up runs of `f`, then `runs` timed ones, one at a time. */
export async function timedRuns(f: () => Promise<unknown>, runs: number): Promise<LatencyStats> {
  for (let i = 0; i < 2; i++) await f();
  const xs: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    await f();
    xs.push(performance.now() - t0);
  }
  return latencyStats(xs);
}
