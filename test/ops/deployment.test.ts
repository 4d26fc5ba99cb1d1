/**
 * docs/deployment.md as an operator follows it. Every command of its ```sh blocks is one
 * this file runs (the guide's own text, with its addresses and paths swapped for the
 * test's) or the text of a file in scripts/, so the guide cannot drift from what runs.
 * Then the scripts for real: the units installed into a temporary root (and checked by
 * `systemd-analyze verify` where it works), the env example loaded by loadConfig, a backup
 * of a database holding a workflow and a fact restored into a new one, on which `serve`
 * still takes the original account's secret, its tokens and its connector's secret, and
 * the upgrade: migrate, move the release link, restart one unit at a time.
 * systemctl is a stand-in on PATH that writes down what it was asked.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { Webhook } from 'standardwebhooks';
import { loadConfig } from '../../src/config.ts';
import { migrations } from '../../src/db/migrate.ts';
import { freshPostgresDatabase } from '../helpers/app.ts';
import { freePort, ROOT, runProcess, type CliRun } from '../helpers/cli.ts';

const GUIDE_FILE = path.join(ROOT, 'docs/deployment.md');
const NODE = path.join(ROOT, 'node_modules/.bin/node');
const PG = process.env.DATABASE_URL;
const example = fs.readFileSync(path.join(ROOT, 'deploy/tributary.env.example'), 'utf8');

/** The guide's commands this file runs, exactly as the guide has them (without `sudo`). */
const GUIDE = {
  install: 'scripts/deploy/install-units.sh',
  enable: 'systemctl enable --now tributary-serve@8080 tributary-worker@1',
  ready: 'curl -fsS http://127.0.0.1:8080/readyz',
  backup: 'scripts/deploy/backup.sh /var/backups/tributary',
  stop: 'systemctl stop tributary-serve@8080 tributary-worker@1',
  restore: 'scripts/deploy/restore.sh /var/backups/tributary/tributary-20261127T030000Z.dump',
  start: 'systemctl start tributary-serve@8080 tributary-worker@1',
  rehearseRestore:
    'DATABASE_URL=postgres://tributary@db.internal:5432/tributary_rehearsal scripts/deploy/restore.sh /var/backups/tributary/tributary-20261127T030000Z.dump',
  rehearseMigrate: 'DATABASE_URL=postgres://tributary@db.internal:5432/tributary_rehearsal node_modules/.bin/node bin/tributary.js migrate',
  upgrade: 'scripts/deploy/upgrade.sh tributary-serve@8080 tributary-worker@1',
} as const;

type GuideCommand = keyof typeof GUIDE;

interface Block {
  lang: string;
  text: string;
}

function guideBlocks(): Block[] {
  return [...fs.readFileSync(GUIDE_FILE, 'utf8').matchAll(/^```(\S*)\n([\s\S]*?)^```$/gm)].map((m) => ({ lang: m[1]!, text: m[2]! }));
}

/** The commands of a ```sh block: continued lines joined, comments and a leading `sudo` dropped. */
function commandsOf(block: string): string[] {
  return block
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((line) =>
      line
        .replace(/(^|\s)#\s.*$/, '')
        .replace(/\s+/g, ' ')
        .trim()
        .replace(/^sudo /, ''),
    )
    .filter((line) => line !== '' && !line.startsWith('#'));
}

function filesUnder(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? filesUnder(path.join(dir, e.name)) : [path.join(dir, e.name)]));
}

/** The ```text block right after the ```sh block holding `command`: what the guide says it prints. */
function shownOutput(command: string): string {
  const blocks = guideBlocks();
  const i = blocks.findIndex((b) => b.lang === 'sh' && commandsOf(b.text).includes(command));
  const next = blocks[i + 1];
  assert.ok(i >= 0 && next?.lang === 'text', `the guide shows what \`${command}\` prints`);
  return next.text.trim();
}

const cleanups: Array<() => unknown> = [];
after(async () => {
  for (const c of cleanups.reverse()) await c();
});

function tempDir(name: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `tributary-deploy-${name}-`));
  cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

// systemctl as a stand-in: it writes down each call.
const fakeBin = tempDir('bin');
const systemctlLog = path.join(fakeBin, 'systemctl.log');
fs.writeFileSync(path.join(fakeBin, 'systemctl'), '#!/usr/bin/env bash\necho "$*" >>"$SYSTEMCTL_LOG"\n', { mode: 0o755 });
function systemctlCalls(): string[] {
  const calls = fs.existsSync(systemctlLog) ? fs.readFileSync(systemctlLog, 'utf8').trim().split('\n').filter(Boolean) : [];
  fs.rmSync(systemctlLog, { force: true });
  return calls;
}

/** This environment without the settings of the test run, as an operator's shell has them. */
function shellEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env))
    if (!/^(TRIBUTARY_|PORT$|HOST$|DATA_DIR$|DATABASE_URL$|REDIS_URL$|LOG_LEVEL$|DESTDIR$|READY_|SETTLE_SECONDS$)/.test(k)) env[k] = v;
  return { ...env, PATH: `${fakeBin}:${process.env.PATH}`, SYSTEMCTL_LOG: systemctlLog, SETTLE_SECONDS: '0', ...extra };
}

interface Swaps {
  port?: number;
  backupDir?: string;
  dump?: string;
  rehearsalUrl?: string;
}

/** Runs guide commands in order in one bash, in the project directory, with the test's addresses and paths. */
function runGuide(names: GuideCommand[], swaps: Swaps, env: Record<string, string>): Promise<CliRun> {
  const script = names.map((name) => {
    let cmd: string = GUIDE[name];
    if (swaps.rehearsalUrl) cmd = cmd.replaceAll('postgres://tributary@db.internal:5432/tributary_rehearsal', swaps.rehearsalUrl);
    if (swaps.dump) cmd = cmd.replaceAll('tributary-20261127T030000Z.dump', swaps.dump);
    if (swaps.backupDir) cmd = cmd.replaceAll('/var/backups/tributary', swaps.backupDir);
    if (swaps.port) cmd = cmd.replaceAll('8080', String(swaps.port));
    return cmd;
  });
  return runProcess('bash', ['-c', ['set -euo pipefail', ...script].join('\n')], ROOT, shellEnv(env));
}

/** KEY=VALUE lines as systemd reads an EnvironmentFile (the guide's files have no quotes). */
function parseEnvFile(text: string): Record<string, string> {
  const vars: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const m = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(line.trim());
    if (m) vars[m[1]!] = m[2]!;
  }
  return vars;
}

test('every command of the guide is run by this file or by a script in scripts/', () => {
  const blocks = guideBlocks();
  assert.deepEqual(
    blocks.filter((b) => ['bash', 'shell', 'console', 'zsh'].includes(b.lang)).map((b) => b.lang),
    [],
    'shell commands are in ```sh blocks, so that this test sees them',
  );
  const commands = blocks.filter((b) => b.lang === 'sh').flatMap((b) => commandsOf(b.text));
  assert.ok(commands.length >= Object.keys(GUIDE).length);
  const scripts = filesUnder(path.join(ROOT, 'scripts')).map((f) => fs.readFileSync(f, 'utf8').replace(/\s+/g, ' '));
  const ours = new Set<string>(Object.values(GUIDE));
  for (const cmd of commands)
    assert.ok(ours.has(cmd) || scripts.some((s) => s.includes(cmd)), `"${cmd}" (docs/deployment.md) is neither run by this test nor found in scripts/`);
  for (const cmd of ours) assert.ok(commands.includes(cmd), `"${cmd}" is run here but no longer in docs/deployment.md`);
});

test('the settings the guide and the env example name are documented settings', () => {
  const documented = new Set([...fs.readFileSync(path.join(ROOT, 'docs/configuration.md'), 'utf8').matchAll(/^\| `([A-Z][A-Z0-9_]*)`/gm)].map((m) => m[1]!));
  const named = [...example.matchAll(/^#? ?([A-Z][A-Z0-9_]*)=/gm)].map((m) => m[1]!);
  assert.ok(named.length > 10);
  for (const name of named) assert.ok(documented.has(name), `${name} (deploy/tributary.env.example) is not in docs/configuration.md`);
  const guide = fs.readFileSync(GUIDE_FILE, 'utf8');
  const table = guide.slice(guide.indexOf('## Settings that must agree'), guide.indexOf('## The balancer'));
  const agreed = [...table.matchAll(/^\| (`[A-Z][^|]*)\|/gm)].flatMap((m) => [...m[1]!.matchAll(/`([A-Z][A-Z0-9_]*)`/g)].map((n) => n[1]!));
  assert.ok(agreed.length > 15);
  for (const name of agreed) assert.ok(documented.has(name), `${name} (the guide's table) is not in docs/configuration.md`);
  // The serve unit's port comes from its instance name; a PORT in the shared file would be ignored, and misleading.
  assert.doesNotMatch(example, /^PORT=/m);
  assert.equal(example.match(/^TRIBUTARY_ADMIN_TOKEN=@ADMIN_TOKEN@$/gm)?.length, 1, 'install-units.sh replaces this placeholder');
});

test('the deploy scripts pass shellcheck', async (t) => {
  const dir = path.join(ROOT, 'scripts/deploy');
  const scripts = fs.readdirSync(dir).filter((f) => f.endsWith('.sh'));
  for (const f of scripts) assert.match(fs.readFileSync(path.join(dir, f), 'utf8'), f === 'env.sh' ? /^# shellcheck shell=bash\n/ : /\nset -euo pipefail\n/, f);
  const r = await runProcess('shellcheck', ['--external-sources', ...scripts], dir, process.env).catch(() => undefined);
  if (!r) {
    t.skip('shellcheck is not installed (Debian: apt-get install shellcheck)');
    return;
  }
  assert.equal(r.code, 0, r.stdout + r.stderr);
});

// Shared by the tests below, which run in order.
const root = tempDir('root');
const home = path.join(tempDir('opt'), 'current');

test('install-units.sh installs both units and an env file with a fresh admin token that loadConfig takes', async (t) => {
  const env = { DESTDIR: root, TRIBUTARY_HOME: home };
  const first = await runGuide(['install'], {}, env);
  assert.equal(first.code, 0, first.stderr + first.stdout);
  assert.equal(fs.realpathSync(home), fs.realpathSync(ROOT), 'TRIBUTARY_HOME is made a link to this release');
  const unitDir = path.join(root, 'etc/systemd/system');
  const serveUnit = fs.readFileSync(path.join(unitDir, 'tributary-serve@.service'), 'utf8');
  const workerUnit = fs.readFileSync(path.join(unitDir, 'tributary-worker@.service'), 'utf8');
  assert.match(serveUnit, new RegExp(`^ExecStart=/usr/bin/env PORT=%i ${home}/node_modules/.bin/node ${home}/bin/tributary.js serve --no-worker$`, 'm'));
  assert.match(workerUnit, new RegExp(`^ExecStart=${home}/node_modules/.bin/node ${home}/bin/tributary.js worker$`, 'm'));
  for (const unit of [serveUnit, workerUnit]) {
    for (const line of ['Restart=on-failure', 'KillSignal=SIGTERM', 'KillMode=mixed', 'NoNewPrivileges=yes', 'ProtectSystem=strict', 'PrivateTmp=yes'])
      assert.match(unit, new RegExp(`^${line}$`, 'm'));
    assert.match(unit, /^ReadWritePaths=\/var\/lib\/tributary$/m);
    assert.match(unit, /^EnvironmentFile=\/etc\/tributary\/tributary.env$/m);
  }

  const envFile = path.join(root, 'etc/tributary/tributary.env');
  assert.equal(fs.statSync(envFile).mode & 0o777, 0o600, 'the env file holds the admin token and the database password');
  const installedEnv = fs.readFileSync(envFile, 'utf8');
  for (const line of installedEnv.split('\n').filter((l) => l.trim() !== '' && !l.startsWith('#')))
    assert.match(line, /^[A-Z][A-Z0-9_]*=[^'"]*$/, 'plain KEY=VALUE lines, read alike by systemd, env.sh and this test');
  const vars = parseEnvFile(installedEnv);
  assert.match(vars.TRIBUTARY_ADMIN_TOKEN ?? '', /^tbadm_[A-Za-z0-9_-]{43}$/);
  assert.equal(installedEnv, example.replace('@ADMIN_TOKEN@', vars.TRIBUTARY_ADMIN_TOKEN!), 'the example, with its token');
  const config = loadConfig(vars);
  assert.equal(config.adminToken, vars.TRIBUTARY_ADMIN_TOKEN);
  assert.match(config.databaseUrl ?? '', /^postgres:\/\//);
  assert.match(config.redisUrl ?? '', /^redis:\/\//);
  assert.equal(config.host, '0.0.0.0');
  assert.equal(config.maxConnectionsPerAddress, 0);
  assert.equal(config.dataDir, '/var/lib/tributary');
  for (const unit of [serveUnit, workerUnit]) {
    const stopSeconds = Number(/^TimeoutStopSec=(\d+)$/m.exec(unit)?.[1]);
    assert.ok(stopSeconds * 1000 > config.shutdownGraceMs + 5000, 'systemd waits for the drain and the pool to close');
  }

  // Run again, it keeps the file; another machine's run makes another token.
  const again = await runGuide(['install'], {}, env);
  assert.equal(again.code, 0, again.stderr);
  assert.match(again.stdout, /kept .*tributary\.env/);
  assert.equal(fs.readFileSync(envFile, 'utf8'), installedEnv);
  const otherRoot = tempDir('root2');
  assert.equal((await runGuide(['install'], {}, { DESTDIR: otherRoot, TRIBUTARY_HOME: home })).code, 0);
  assert.notEqual(parseEnvFile(fs.readFileSync(path.join(otherRoot, 'etc/tributary/tributary.env'), 'utf8')).TRIBUTARY_ADMIN_TOKEN, vars.TRIBUTARY_ADMIN_TOKEN);

  // The guide's systemctl command names units that are installed.
  const enable = await runGuide(['enable'], {}, env);
  assert.equal(enable.code, 0, enable.stderr);
  const [call] = systemctlCalls();
  assert.equal(call, 'enable --now tributary-serve@8080 tributary-worker@1');
  for (const instance of call!.split(' ').slice(2)) assert.ok(fs.existsSync(path.join(unitDir, instance.replace(/@.*/, '@.service'))), instance);

  await t.test('systemd-analyze verify', async (t) => {
    const verify = (...units: string[]) =>
      runProcess('systemd-analyze', ['verify', ...units], ROOT, { ...process.env, SYSTEMD_LOG_COLOR: '0' }).catch(() => undefined);
    // A unit known to be good first: when even that does not verify, systemd-analyze does not work here.
    const control = path.join(tempDir('control'), 'control.service');
    fs.writeFileSync(control, '[Service]\nType=exec\nExecStart=/bin/true\n');
    const probe = await verify(control);
    if (!probe || probe.code !== 0 || probe.stderr.trim() !== '') {
      t.skip(`systemd-analyze verify does not work here: ${probe ? `exit ${probe.code} ${probe.stderr.trim()}` : 'not installed'}`);
      return;
    }
    const r = await verify(path.join(unitDir, 'tributary-serve@8080.service'), path.join(unitDir, 'tributary-worker@1.service'));
    assert.equal(r!.code, 0, r!.stderr);
    assert.equal(r!.stderr.trim(), '', 'no warning about the units');
  });
});

/** The env file install-units.sh writes, edited as an operator does: the test's database and DATA_DIR. */
function envFileFor(settings: { DATABASE_URL?: string; DATA_DIR: string }): string {
  const text = example
    .replace('@ADMIN_TOKEN@', `tbadm_${randomBytes(32).toString('base64url')}`)
    .replace(/^DATABASE_URL=.*$/m, settings.DATABASE_URL ? `DATABASE_URL=${settings.DATABASE_URL}` : '')
    .replace(/^DATA_DIR=.*$/m, `DATA_DIR=${settings.DATA_DIR}`)
    .replace(/^REDIS_URL=.*$/m, process.env.REDIS_URL ? `REDIS_URL=${process.env.REDIS_URL}` : '');
  const file = path.join(tempDir('etc'), 'tributary.env');
  fs.writeFileSync(file, text, { mode: 0o600 });
  return file;
}

interface Server {
  url: string;
  port: number;
  stop(): Promise<void>;
}

/** `tributary serve` (with its worker) as a child process, once /readyz says ready. */
async function serve(settings: { DATABASE_URL?: string; DATA_DIR: string }): Promise<Server> {
  const port = await freePort();
  const env: NodeJS.ProcessEnv = shellEnv({ PORT: String(port), HOST: '127.0.0.1', DATA_DIR: settings.DATA_DIR, LOG_LEVEL: 'warn', LOG_FORMAT: 'json' });
  if (settings.DATABASE_URL) env.DATABASE_URL = settings.DATABASE_URL;
  if (process.env.REDIS_URL) env.REDIS_URL = process.env.REDIS_URL;
  const child: ChildProcess = spawn(NODE, ['src/main.ts', 'serve'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (output += c.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
  };
  cleanups.push(stop);
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 120_000;
  for (;;) {
    if (child.exitCode !== null) assert.fail(`serve exited with ${child.exitCode}: ${output}`);
    const status = await fetch(`${url}/readyz`).then(
      (r) => r.status,
      () => 0,
    );
    if (status === 200) return { url, port, stop };
    if (Date.now() > deadline) assert.fail(`serve did not get ready: ${output}`);
    await sleep(100);
  }
}

interface Seeded {
  clientId: string;
  clientSecret: string;
  /** An access token made by the first server. */
  token: string;
  workflowId: string;
  hook: string;
  signer: Webhook;
}

async function call(base: string, token: string, method: string, p: string, body?: unknown): Promise<any> {
  const res = await fetch(`${base}${p}`, {
    method,
    headers: { authorization: `Bearer ${token}`, accept: 'application/vnd.api+json', 'content-type': 'application/vnd.api+json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = await res.json();
  assert.ok(res.status < 300, `${method} ${p}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

async function exchange(base: string, clientId: string, clientSecret: string): Promise<Response> {
  return fetch(`${base}/api/v1/oauth/token`, {
    method: 'POST',
    body: new URLSearchParams({ grant_type: 'client_credentials', client_id: clientId, client_secret: clientSecret }),
  });
}

/** A signed delivery of order `id` to the trigger behind the HMAC connector; the answer's status and body. */
async function deliver(base: string, s: Seeded, id: string, opts: { badSignature?: boolean } = {}): Promise<{ status: number; body: any }> {
  const body = JSON.stringify({ payload: { order: { id, total: 12.5 } } });
  const at = new Date();
  const signature = opts.badSignature ? new Webhook(`whsec_${randomBytes(32).toString('base64')}`).sign(id, at, body) : s.signer.sign(id, at, body);
  const res = await fetch(`${base}${s.hook}`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${s.token}`,
      'content-type': 'application/json',
      'idempotency-key': id,
      'webhook-id': id,
      'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
      'webhook-signature': signature,
    },
    body,
  });
  return { status: res.status, body: await res.json() };
}

async function factCount(base: string, token: string): Promise<number> {
  const res = await fetch(`${base}/api/graphql`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ query: '{ factQuery(dataModelSlug: "orders") { count } }' }),
  });
  const body = (await res.json()) as any;
  assert.ok(body.data?.factQuery, JSON.stringify(body));
  return body.data.factQuery.count;
}

/** The bootstrap account's token, a data model, an inbound HMAC connector and a workflow writing a fact per delivery. */
async function seed(server: Server, dataDir: string): Promise<Seeded> {
  const boot = JSON.parse(fs.readFileSync(path.join(dataDir, 'bootstrap.json'), 'utf8'));
  const tokenRes = await exchange(server.url, boot.client_id, boot.client_secret);
  assert.equal(tokenRes.status, 200);
  const token = ((await tokenRes.json()) as { access_token: string }).access_token;
  const model = await call(server.url, token, 'POST', '/api/json/v1/data_models', {
    data: { type: 'data_model', attributes: { name: 'Orders', slug: 'orders' } },
  });
  for (const field of [
    { name: 'order_id', type: 'string', is_primary_key: true },
    { name: 'amount', type: 'float' },
  ])
    await call(server.url, token, 'POST', '/api/json/v1/data_model_fields', {
      data: { type: 'data_model_field', attributes: { data_model_id: model.data.id, ...field } },
    });
  const secret = `whsec_${randomBytes(32).toString('base64')}`;
  const connector = await call(server.url, token, 'POST', '/api/json/v1/external_connectors', {
    data: { type: 'external_connector', attributes: { name: 'Shop', auth_type: 'hmac', direction: 'inbound', secret } },
  });
  // A transform shaping the order and a write_fact storing it, behind the connector.
  const attributes = {
    organization_id: boot.organization_id,
    is_new_version: false,
    wf_params: { name: 'Orders from the shop', is_active: true },
    trigger_params: [{ key: 'shop', type: 'webhook', service_account_id: boot.credential_id, inbound_connector_id: connector.data.id }],
    step_params: [
      { key: 'shape', type: 'transform', config: { expression: '{"order_id": payload.order.id, "amount": payload.order.total}' } },
      { key: 'store', type: 'write_fact', config: { data_model_slug: 'orders', data: 'steps.shape' } },
    ],
  };
  const saved = await call(server.url, token, 'POST', '/api/json/v1/workflows/save_builder_state', { data: { type: 'workflow_builder_state', attributes } });
  return {
    clientId: boot.client_id,
    clientSecret: boot.client_secret,
    token,
    workflowId: saved.data.id,
    hook: `/api/v1/webhooks/${saved.meta.trigger_tokens.shop}`,
    signer: new Webhook(secret),
  };
}

async function runFinished(base: string, token: string, runId: string): Promise<string> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const run = await call(base, token, 'GET', `/api/json/v1/workflow_runs/${runId}`);
    const status = run.data.attributes.status as string;
    if (status === 'succeeded' || status === 'failed') return status;
    assert.ok(Date.now() < deadline, `run ${runId} is still ${status}`);
    await sleep(50);
  }
}

async function instanceSecrets(url: string): Promise<unknown[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query('select name, value from instance_secrets order by name')).rows;
  } finally {
    await client.end();
  }
}

// Shared by the backup, rehearsal and upgrade tests.
const backupDir = path.join(tempDir('backups'), 'tributary');
let dumpName = '';
let printedPath = '';
let restored: Server | undefined;

test('backup.sh and restore.sh: the restored installation keeps its accounts, keys, guards and facts', { timeout: 300_000 }, async () => {
  const dataA = tempDir('data-a');
  const dbA = PG ? await freshPostgresDatabase() : undefined;
  if (dbA) cleanups.push(dbA.drop);
  const a = await serve({ DATABASE_URL: dbA?.url, DATA_DIR: dataA });
  const s = await seed(a, dataA);
  const first = await deliver(a.url, s, 'order-1');
  assert.equal(first.status, 202, JSON.stringify(first.body));
  assert.equal(first.body.status, 'accepted');
  assert.equal(await runFinished(a.url, s.token, first.body.workflow_run_id), 'succeeded');
  assert.equal(await factCount(a.url, s.token), 1);

  const envA = envFileFor({ DATABASE_URL: dbA?.url, DATA_DIR: dataA });
  let lostDelivery: string | undefined;
  if (dbA) {
    // PostgreSQL: the dump is taken while the service runs.
    const backup = await runGuide(['backup'], { backupDir }, { TRIBUTARY_ENV_FILE: envA });
    assert.equal(backup.code, 0, backup.stderr);
    printedPath = backup.stdout.trim();
    dumpName = path.basename(printedPath);
    // Accepted after the dump: the restore does not know it.
    const late = await deliver(a.url, s, 'order-2');
    assert.equal(late.body.status, 'accepted');
    lostDelivery = 'order-2';
    await a.stop();
  } else {
    // PGlite: not while the process has the directory open.
    const refused = await runGuide(['backup'], { backupDir }, { TRIBUTARY_ENV_FILE: envA });
    assert.notEqual(refused.code, 0);
    assert.match(refused.stderr, /is in use by process \d+/);
    await a.stop();
    const backup = await runGuide(['backup'], { backupDir }, { TRIBUTARY_ENV_FILE: envA });
    assert.equal(backup.code, 0, backup.stderr);
    printedPath = backup.stdout.trim();
    dumpName = path.basename(printedPath);
  }
  const dumpFile = path.join(backupDir, dumpName);
  assert.equal(printedPath, dumpFile);
  assert.match(shownOutput(GUIDE.backup), /^\/var\/backups\/tributary\/tributary-\d{8}T\d{6}Z\.dump$/);
  assert.match(dumpName, dbA ? /^tributary-\d{8}T\d{6}Z\.dump$/ : /^tributary-\d{8}T\d{6}Z\.tar\.gz$/, 'backup.sh prints the path, as the guide shows');
  assert.equal(fs.statSync(dumpFile).mode & 0o777, 0o600, 'the dump holds the keys');
  assert.equal(fs.readFileSync(dumpFile).subarray(0, 5).toString() === 'PGDMP', Boolean(dbA));

  // Into a new, empty database (or directory) only.
  const dataB = tempDir('data-b');
  let envB: string;
  let dbB: { url: string; drop: () => Promise<void> } | undefined;
  if (dbA) {
    const intoUsed = await runGuide(['restore'], { backupDir, dump: dumpName }, { TRIBUTARY_ENV_FILE: envA });
    assert.notEqual(intoUsed.code, 0);
    assert.match(intoUsed.stderr, /has \d+ tables: restore into a new, empty database/);
    dbB = await freshPostgresDatabase({ empty: true });
    cleanups.push(dbB.drop);
    envB = envFileFor({ DATABASE_URL: dbB.url, DATA_DIR: dataB });
  } else {
    const intoUsed = await runGuide(['restore'], { backupDir, dump: dumpName }, { TRIBUTARY_ENV_FILE: envA });
    assert.notEqual(intoUsed.code, 0);
    assert.match(intoUsed.stderr, /is not empty/);
    fs.rmSync(dataB, { recursive: true });
    envB = envFileFor({ DATA_DIR: dataB });
  }
  const r = await runGuide(['stop', 'restore', 'start'], { backupDir, dump: dumpName }, { TRIBUTARY_ENV_FILE: envB });
  assert.equal(r.code, 0, r.stderr + r.stdout);
  assert.deepEqual(systemctlCalls(), ['stop tributary-serve@8080 tributary-worker@1', 'start tributary-serve@8080 tributary-worker@1']);

  // A machine of its own: a DATA_DIR without bootstrap.json (PGlite: the restored one).
  const b = await serve({ DATABASE_URL: dbB?.url, DATA_DIR: dbB ? tempDir('data-b2') : dataB });
  restored = b;
  const ready = await runGuide(['ready'], { port: b.port }, {});
  assert.equal(ready.code, 0, ready.stderr);
  assert.equal(ready.stdout.trim(), shownOutput(GUIDE.ready).replace('"shared"', process.env.REDIS_URL ? '"shared"' : '"per process"'));

  assert.equal(await factCount(b.url, s.token), 1, 'the fact came along, and a token of the first server still works: the signing key came along');
  assert.equal((await exchange(b.url, s.clientId, s.clientSecret)).status, 200, "the original account's secret still works");
  const workflows = await call(b.url, s.token, 'GET', '/api/json/v1/workflows');
  assert.deepEqual(
    workflows.data.map((w: { id: string }) => w.id),
    [s.workflowId],
  );
  const repeat = await deliver(b.url, s, 'order-1');
  assert.equal(repeat.status, 202);
  assert.equal(repeat.body.status, 'duplicate', 'the delivery guard came along');
  // The connector's secret opens only with the installation's connector key: it came along too.
  const bad = await deliver(b.url, s, 'order-3', { badSignature: true });
  assert.equal(bad.status, 401, JSON.stringify(bad.body));
  const fresh = await deliver(b.url, s, 'order-3');
  assert.equal(fresh.body.status, 'accepted', JSON.stringify(fresh.body));
  assert.equal(await runFinished(b.url, s.token, fresh.body.workflow_run_id), 'succeeded');
  if (lostDelivery) {
    // What the guide says a restore loses: a delivery accepted after the dump is new again.
    const again = await deliver(b.url, s, lostDelivery);
    assert.equal(again.body.status, 'accepted');
    assert.deepEqual(await instanceSecrets(dbB!.url), await instanceSecrets(dbA!.url));
    assert.equal(fs.existsSync(path.join(dataB, 'bootstrap.json')), false, 'a restored database is not empty: no new default account');
  }
});

test('the rehearsal: the dump restored into a scratch database and migrated with the release', { timeout: 120_000 }, async (t) => {
  if (!PG) {
    t.skip('PostgreSQL only (DATABASE_URL is unset): a PGlite backup is a copy of DATA_DIR');
    return;
  }
  assert.ok(dumpName, 'the backup test made a dump');
  const scratch = await freshPostgresDatabase({ empty: true });
  cleanups.push(scratch.drop);
  // The env file names another database: the command's own DATABASE_URL wins.
  const env = { TRIBUTARY_ENV_FILE: envFileFor({ DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none', DATA_DIR: tempDir('data-r') }) };
  const r = await runGuide(['rehearseRestore', 'rehearseMigrate'], { backupDir, dump: dumpName, rehearsalUrl: scratch.url }, env);
  assert.equal(r.code, 0, r.stderr + r.stdout);
  assert.match(r.stdout, /^restored .*\.dump\ndatabase is up to date\n$/);
});

test('upgrade.sh: migrate with the new release, move the link, restart one unit at a time', { timeout: 120_000 }, async () => {
  assert.ok(restored, 'the restore test left a server running');
  const db = PG ? await freshPostgresDatabase({ empty: true }) : undefined;
  if (db) cleanups.push(db.drop);
  const link = path.join(tempDir('opt2'), 'current');
  const oldRelease = tempDir('old-release');
  fs.symlinkSync(oldRelease, link);
  const env = { TRIBUTARY_ENV_FILE: envFileFor({ DATABASE_URL: db?.url, DATA_DIR: tempDir('data-u') }), TRIBUTARY_HOME: link };

  const r = await runGuide(['upgrade'], { port: restored.port }, env);
  assert.equal(r.code, 0, r.stderr + r.stdout);
  if (db) {
    assert.match(r.stdout, new RegExp(`^applied: ${Object.keys(migrations).join(', ')}$`, 'm'));
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    const applied = (await client.query('select name from schema_migrations order by name')).rows.map((row) => row.name);
    await client.end();
    assert.deepEqual(applied, Object.keys(migrations));
  } else {
    assert.match(r.stdout, /no DATABASE_URL \(PGlite\): the restart applies the migrations/);
  }
  assert.equal(fs.readlinkSync(link), fs.realpathSync(ROOT));
  assert.deepEqual(systemctlCalls(), [`restart tributary-serve@${restored.port}`, 'restart tributary-worker@1']);
  assert.match(r.stdout, new RegExp(`tributary-serve@${restored.port} is ready`));

  // An instance that does not get ready stops the upgrade: the next unit keeps running.
  const nobody = await freePort();
  const stuck = await runGuide(['upgrade'], { port: nobody }, { ...env, READY_TIMEOUT: '2' });
  assert.notEqual(stuck.code, 0);
  assert.match(stuck.stderr, new RegExp(`tributary-serve@${nobody} is not ready after 2 s .*the upgrade stops here`));
  assert.deepEqual(systemctlCalls(), [`restart tributary-serve@${nobody}`]);

  if (db) {
    // A migration that fails restarts nothing and leaves the link where it was.
    fs.rmSync(link);
    fs.symlinkSync(oldRelease, link);
    const missing = new URL(db.url);
    missing.pathname = `/tributary_missing_${randomBytes(4).toString('hex')}`;
    const failed = await runGuide(['upgrade'], { port: restored.port }, { ...env, DATABASE_URL: missing.toString() });
    assert.notEqual(failed.code, 0);
    assert.match(failed.stderr, /does not exist/);
    assert.deepEqual(systemctlCalls(), []);
    assert.equal(fs.readlinkSync(link), oldRelease);
  }
});
