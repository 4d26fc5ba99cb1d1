/**
 * `tributary serve` started before PostgreSQL answers: it listens at once, /healthz is 200,
 * /readyz and the API are 503 with Retry-After, and it retries with backoff (logged) while
 * connections are refused, then held unanswered; once the database answers it migrates the
 * empty database, bootstraps, turns ready and serves a token exchange. A real process, the
 * database behind a TCP proxy.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freshPostgresDatabase } from '../helpers/app.ts';
import { freePort } from '../helpers/cli.ts';
import { tcpProxy } from '../helpers/tcp-proxy.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const NODE = path.join(ROOT, 'node_modules/.bin/node');
// Bounds on waiting for what a few seconds bring about (backoff tops out at 10 s): never a measurement.
const PATIENCE_MS = 90_000;

const cleanups: Array<() => Promise<void> | void> = [];
after(async () => {
  for (const c of cleanups.reverse()) await c();
});

/** `tributary serve` as a child process, killed at the end if still running. */
function spawnServe(env: NodeJS.ProcessEnv) {
  const child = spawn(NODE, ['src/main.ts', 'serve'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (s: string) => (out += s));
  child.stderr.setEncoding('utf8').on('data', (s: string) => (out += s));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  cleanups.push(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await exited;
    }
  });
  return {
    child,
    exited,
    output: () => out,
    /** undefined while it runs; what it printed once it exited. */
    alive: () => (child.exitCode === null ? undefined : `code ${child.exitCode}: ${out}`),
  };
}

/** Polls until `check` returns a value (not undefined), the process exits, or patience runs out. */
async function until<T>(what: string, check: () => Promise<T | undefined>, alive: () => string | undefined): Promise<T> {
  const deadline = Date.now() + PATIENCE_MS;
  for (;;) {
    const dead = alive();
    if (dead !== undefined) assert.fail(`serve exited while waiting for ${what}: ${dead}`);
    const value = await check().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) assert.fail(`no ${what}`);
    await sleep(100);
  }
}

test(
  'serve waits for PostgreSQL: alive and not ready meanwhile, then migrates and serves',
  { skip: process.env.DATABASE_URL ? false : 'PGlite is embedded in the process: there is no database to wait for', timeout: 300_000 },
  async () => {
    const fresh = await freshPostgresDatabase({ empty: true });
    cleanups.push(fresh.drop);
    const target = new URL(fresh.url);
    const proxy = await tcpProxy({ host: target.hostname, port: Number(target.port || 5432) });
    cleanups.push(() => proxy.close());
    await proxy.refuse();
    const viaProxy = new URL(fresh.url);
    viaProxy.hostname = '127.0.0.1';
    viaProxy.port = String(proxy.port);

    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tributary-dblater-'));
    cleanups.push(() => fs.rmSync(dataDir, { recursive: true, force: true }));
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const env: NodeJS.ProcessEnv = {};
    for (const [k, v] of Object.entries(process.env)) if (!/^(TRIBUTARY_|PORT$|HOST$|DATA_DIR$|DATABASE_|REDIS_URL$|LOG_)/.test(k)) env[k] = v;
    Object.assign(env, {
      PORT: String(port),
      HOST: '127.0.0.1',
      DATA_DIR: dataDir,
      LOG_LEVEL: 'info',
      LOG_FORMAT: 'json',
      DATABASE_URL: viaProxy.toString(),
      DATABASE_CONNECT_TIMEOUT_MS: '1000',
    });

    const { child, exited, output, alive } = spawnServe(env);
    const waits = () =>
      output()
        .split('\n')
        .filter((l) => l.includes('"msg":"waiting for the database"'));

    // Alive, not ready, and the API says so in each surface's shape.
    await until('/healthz 200', async () => ((await fetch(`${base}/healthz`)).status === 200 ? true : undefined), alive);
    const readyz = await fetch(`${base}/readyz`);
    assert.equal(readyz.status, 503);
    assert.ok(Number(readyz.headers.get('retry-after')) > 0);
    assert.equal(((await readyz.json()) as { status: string }).status, 'starting');
    const api = await fetch(`${base}/api/json/v1/organizations`, { headers: { authorization: 'Bearer x' } });
    assert.equal(api.status, 503);
    assert.ok(Number(api.headers.get('retry-after')) > 0);
    assert.equal(((await api.json()) as { errors: Array<{ code: string }> }).errors[0]!.code, 'unavailable');
    const token = await fetch(`${base}/api/v1/oauth/token`, {
      method: 'POST',
      body: new URLSearchParams({ grant_type: 'client_credentials', client_id: 'x', client_secret: 'y' }),
    });
    assert.equal(token.status, 503);
    assert.equal(((await token.json()) as { error: string }).error, 'temporarily_unavailable');

    // Refused, then held unanswered: each attempt is logged with the wait before the next, which grows.
    await until('two refused attempts', async () => (waits().length >= 2 ? true : undefined), alive);
    await proxy.listenAgain();
    proxy.blackhole();
    const before = waits().length;
    await until('an attempt that timed out', async () => (waits().length > before ? true : undefined), alive);
    const logged = waits().map((l) => JSON.parse(l) as { retry_in_ms: number; attempt: number });
    assert.deepEqual(
      logged.slice(0, 3).map((l) => l.retry_in_ms),
      [500, 1000, 2000],
    );
    assert.equal((await fetch(`${base}/readyz`)).status, 503);

    // The database answers: migrated, bootstrapped, ready.
    proxy.restore();
    await until('/readyz 200', async () => ((await fetch(`${base}/readyz`)).status === 200 ? true : undefined), alive);
    assert.match(output(), /"msg":"migrations applied"/);
    assert.match(output(), /"msg":"database answers"/);
    const boot = JSON.parse(fs.readFileSync(path.join(dataDir, 'bootstrap.json'), 'utf8')) as { client_id: string; client_secret: string };
    const exchanged = await fetch(`${base}/api/v1/oauth/token`, {
      method: 'POST',
      body: new URLSearchParams({ grant_type: 'client_credentials', client_id: boot.client_id, client_secret: boot.client_secret }),
    });
    assert.equal(exchanged.status, 200, await exchanged.clone().text());
    const { access_token: accessToken } = (await exchanged.json()) as { access_token: string };
    const orgs = await fetch(`${base}/api/json/v1/organizations`, { headers: { authorization: `Bearer ${accessToken}` } });
    assert.equal(orgs.status, 200);

    child.kill('SIGTERM');
    assert.equal(await exited, 0, output());
  },
);

test(
  'SIGTERM while waiting for the database: a clean exit',
  { skip: process.env.DATABASE_URL ? false : 'PGlite is embedded in the process: there is no database to wait for', timeout: 120_000 },
  async () => {
    const proxy = await tcpProxy({ host: '127.0.0.1', port: 9 });
    await proxy.refuse();
    cleanups.push(() => proxy.close());
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tributary-dblater-'));
    cleanups.push(() => fs.rmSync(dataDir, { recursive: true, force: true }));
    const port = await freePort();
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      PORT: String(port),
      HOST: '127.0.0.1',
      DATA_DIR: dataDir,
      LOG_LEVEL: 'info',
      LOG_FORMAT: 'json',
      DATABASE_URL: `postgres://postgres@127.0.0.1:${proxy.port}/postgres`,
    };
    delete env.REDIS_URL;
    const { child, exited, output, alive } = spawnServe(env);
    await until('a logged wait', async () => (output().includes('"msg":"waiting for the database"') ? true : undefined), alive);
    child.kill('SIGTERM');
    assert.equal(await exited, 0, output());
    assert.match(output(), /"msg":"stopped"/);
  },
);
