/**
 * REDIS_URL set and Redis gone: requests are answered at once, their windows counted in
 * the process (said once in the log), /readyz says so, and the windows are shared again
 * when Redis is back. The test runs its own redis-server on a free port and kills it.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import net from 'node:net';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { capturingLogger, jsonApi, seedTenant, startApp, type TestApp } from '../helpers/app.ts';
import { RUNAWAY_MS } from '../helpers/runaway.ts';
import { freePort } from '../helpers/cli.ts';

const hasRedis = (() => {
  try {
    execFileSync('redis-server', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

let redisDir: string;
let port: number;
let redis: ChildProcess | undefined;

async function startRedis(): Promise<void> {
  redis = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', redisDir], { stdio: 'ignore' });
  for (let i = 0; i < 100; i++) {
    const ok = await new Promise<boolean>((resolve) => {
      const s = net.connect(port, '127.0.0.1', () => {
        s.destroy();
        resolve(true);
      });
      s.on('error', () => resolve(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('redis-server did not start');
}

async function killRedis(): Promise<void> {
  const child = redis!;
  redis = undefined;
  // A child that ended on a signal has a signalCode and no exitCode: waiting for it would hang.
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGKILL');
  await once(child, 'exit');
}

const lines: Array<Record<string, unknown>> = [];
let t: TestApp;

before(async () => {
  if (!hasRedis) return;
  redisDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tributary-redis-'));
  port = await freePort();
  await startRedis();
  t = await startApp({ REDIS_URL: `redis://127.0.0.1:${port}`, REDIS_TIMEOUT_MS: '300' }, { log: capturingLogger(lines) });
});

after(async () => {
  if (!hasRedis) return;
  await t?.close();
  if (redis) await killRedis();
  fs.rmSync(redisDir, { recursive: true, force: true });
});

async function readyz(): Promise<{ status: number; body: any }> {
  const res = await fetch(`${t.url}/readyz`);
  return { status: res.status, body: await res.json() };
}

/** A request and how long its answer took. */
async function timed<T>(fn: () => Promise<T>): Promise<{ value: T; ms: number }> {
  const start = performance.now();
  const value = await fn();
  return { value, ms: performance.now() - start };
}

const fallbackLines = () => lines.filter((l) => typeof l.msg === 'string' && l.msg.startsWith('Redis unavailable'));
const backLines = () => lines.filter((l) => typeof l.msg === 'string' && l.msg.startsWith('Redis answers again'));

test(
  'a Redis outage: requests are answered at once from the in-process window, logged once; /readyz tells; Redis back, shared again',
  { skip: hasRedis ? false : 'redis-server is not installed' },
  async () => {
    const tenant = await seedTenant(t.deps);
    const tokenBody = new URLSearchParams({ grant_type: 'client_credentials', client_id: tenant.clientId, client_secret: tenant.clientSecret });
    const exchange = () => fetch(`${t.url}/api/v1/oauth/token`, { method: 'POST', body: tokenBody });

    const first = await exchange();
    assert.equal(first.status, 200);
    const token = ((await first.json()) as { access_token: string }).access_token;
    const api = jsonApi(t, token);
    assert.equal((await api.get('/api/json/v1/organizations')).status, 200);
    assert.deepEqual(await readyz(), { status: 200, body: { status: 'ready', rate_limit: 'shared' } });

    await killRedis();

    // Each answer is an ordinary one, and not held for Redis (the defect waited up to 15 s each;
    // RUNAWAY_MS, helpers/runaway.ts, is the house's bound for a blow-up, not a speed test).
    for (let i = 0; i < 5; i++) {
      const read = await timed(() => api.get('/api/json/v1/organizations'));
      assert.equal(read.value.status, 200, read.value.text);
      assert.ok(read.value.headers.get('ratelimit'), 'the in-process window still limits');
      assert.ok(read.ms < RUNAWAY_MS, `answered after ${read.ms} ms`);
      const tok = await timed(exchange);
      assert.equal(tok.value.status, 200);
      assert.ok(tok.ms < RUNAWAY_MS, `answered after ${tok.ms} ms`);
      const gql = await timed(() =>
        fetch(`${t.url}/api/graphql`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ query: '{ health }' }),
        }),
      );
      assert.equal(gql.value.status, 200);
      assert.ok(gql.ms < RUNAWAY_MS, `answered after ${gql.ms} ms`);
    }
    // A connector's sliding window too: counted in the process, at once.
    const now = t.deps.clock();
    const range = { bucketMs: 100, from: now - 1100, keepMs: 1300 };
    for (const taken of [true, true, false]) {
      const slide = await timed(() => t.deps.limiter.slide('connector:outage:100', range, now, 2));
      assert.equal(slide.value.taken, taken);
      assert.ok(slide.ms < RUNAWAY_MS, `answered after ${slide.ms} ms`);
    }
    assert.deepEqual(await readyz(), { status: 200, body: { status: 'ready', rate_limit: 'per process (Redis unavailable)' } });
    assert.equal(fallbackLines().length, 1, JSON.stringify(fallbackLines()));
    assert.equal(fallbackLines()[0]!.level, 40);
    assert.deepEqual(
      lines.filter((l) => (l.level as number) >= 50),
      [],
    );

    await startRedis();
    let shared = false;
    for (let i = 0; i < 100 && !shared; i++) {
      await api.get('/api/json/v1/organizations');
      shared = (await readyz()).body.rate_limit === 'shared';
      if (!shared) await new Promise((r) => setTimeout(r, 100));
    }
    assert.ok(shared, 'the windows are shared again once Redis answers');
    assert.equal(backLines().length, 1);
    assert.equal(fallbackLines().length, 1, 'still one line for the one outage');
  },
);
