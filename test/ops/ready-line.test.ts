/**
 * `npm start` (`tributary serve`) says in one plain line when it is ready and where to go:
 * the console's URL and the bootstrap credentials' file. The line is on stderr, so stdout
 * stays the JSON logs, one document a line.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freshPostgresDatabase } from '../helpers/app.ts';
import { freePort, ROOT } from '../helpers/cli.ts';

const NODE = path.join(ROOT, 'node_modules/.bin/node');
const cleanups: Array<() => Promise<void> | void> = [];
after(async () => {
  for (const c of cleanups.reverse()) await c();
});

test('serve prints one ready line, when /readyz says ready, naming the console and the bootstrap file', { timeout: 120_000 }, async () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tributary-ready-'));
  cleanups.push(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  const port = await freePort();
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!/^(TRIBUTARY_|PORT$|HOST$|DATA_DIR$|DATABASE_URL$|REDIS_URL$|LOG_LEVEL$)/.test(k)) env[k] = v;
  Object.assign(env, { PORT: String(port), DATA_DIR: dataDir, LOG_LEVEL: 'info' });
  if (process.env.DATABASE_URL) {
    const fresh = await freshPostgresDatabase();
    cleanups.push(fresh.drop);
    env.DATABASE_URL = fresh.url;
  }
  const child = spawn(NODE, ['src/main.ts', 'serve'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (s: string) => (stdout += s));
  child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  cleanups.push(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
  });

  const deadline = Date.now() + 90_000;
  while (!stderr.includes('\n')) {
    if (child.exitCode !== null) assert.fail(`serve exited with ${child.exitCode}: ${stderr}\n${stdout}`);
    if (Date.now() > deadline) assert.fail(`no ready line: ${stderr}\n${stdout}`);
    await sleep(20);
  }
  // Ready when it says so: the probe a script would wait for answers 200 at once.
  const readyz = await fetch(`http://127.0.0.1:${port}/readyz`);
  assert.equal(readyz.status, 200);
  const bootstrap = path.join(dataDir, 'bootstrap.json');
  assert.equal(stderr, `Tributary ready: console http://127.0.0.1:${port}/console (bootstrap credentials in ${bootstrap})\n`);
  assert.match(JSON.parse(fs.readFileSync(bootstrap, 'utf8')).client_id, /^tbci_/);
  assert.equal((await fetch(`http://127.0.0.1:${port}/console`)).status, 200, 'the console answers where the line says');

  child.kill('SIGTERM');
  await exited;
  assert.equal(stderr.split('\n').filter(Boolean).length, 1, 'one line for people, said once');
  const lines = stdout.split('\n').filter(Boolean);
  for (const line of lines) assert.doesNotThrow(() => JSON.parse(line), `a log line that is not JSON: ${line}`);
  assert.ok(
    lines.some((l) => (JSON.parse(l) as { msg?: string }).msg === 'ready'),
    'the logs say ready too',
  );
});
