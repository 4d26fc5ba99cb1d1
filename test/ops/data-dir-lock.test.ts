/**
 * One process per PGlite DATA_DIR: a second serve/worker/migrate refuses to start while the
 * first runs, a lock left by a dead process is taken over, the lock goes with the process.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { DataDirInUseError, LOCK_FILE, lockDataDir } from '../../src/db/data-dir-lock.ts';
import { createDb } from '../../src/db/connect.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const NODE = path.join(ROOT, 'node_modules/.bin/node');

const cleanups: Array<() => Promise<void> | void> = [];
after(async () => {
  for (const c of cleanups.reverse()) await c();
});

function tempDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tributary-lock-'));
  cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** The pid of a process that has exited (and so is free, until the kernel hands it out again). */
function deadPid(): number {
  const r = spawnSync(NODE, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
  return Number(r.stdout);
}

function writeLock(dir: string, holder: Record<string, unknown>): void {
  fs.writeFileSync(path.join(dir, LOCK_FILE), JSON.stringify({ host: os.hostname(), started: null, ...holder }));
}

function childEnv(dataDir: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!/^(TRIBUTARY_|PORT$|HOST$|DATA_DIR$|DATABASE_URL$|REDIS_URL$|LOG_LEVEL$)/.test(k)) env[k] = v;
  }
  return Object.assign(env, { PORT: '0', HOST: '127.0.0.1', DATA_DIR: dataDir, LOG_LEVEL: 'info', WORKER: 'false' });
}

function run(args: string[], dataDir: string): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(NODE, ['src/main.ts', ...args], { cwd: ROOT, env: childEnv(dataDir), encoding: 'utf8', timeout: 120_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

test('a live holder keeps the lock; a second open, even from the same process, is refused', () => {
  const dir = tempDir();
  const release = lockDataDir(dir);
  try {
    assert.throws(
      () => lockDataDir(dir),
      (err: unknown) =>
        err instanceof DataDirInUseError && err.message === `DATA_DIR ${dir} is in use by process ${process.pid}; stop that process or set another DATA_DIR`,
    );
  } finally {
    release();
  }
  assert.equal(fs.existsSync(path.join(dir, LOCK_FILE)), false, 'released on close');
  assert.deepEqual(fs.readdirSync(dir), [], 'no temporary files left');

  const other = spawn(NODE, ['-e', 'setTimeout(() => {}, 60_000)'], { stdio: 'ignore' });
  cleanups.push(() => void other.kill('SIGKILL'));
  writeLock(dir, { pid: other.pid });
  assert.throws(() => lockDataDir(dir), new RegExp(`is in use by process ${other.pid};`));
  assert.equal(JSON.parse(fs.readFileSync(path.join(dir, LOCK_FILE), 'utf8')).pid, other.pid, 'the holder keeps its lock');
});

test('a lock left by a dead process, by a former process with our pid, or by a reused pid is taken over', () => {
  for (const holder of [{ pid: deadPid() }, { pid: process.pid }, { pid: process.ppid, started: 'not-the-start-time-of-that-pid' }, 'not json']) {
    const dir = tempDir();
    if (typeof holder === 'string') fs.writeFileSync(path.join(dir, LOCK_FILE), holder);
    else writeLock(dir, holder);
    const release = lockDataDir(dir);
    assert.equal(JSON.parse(fs.readFileSync(path.join(dir, LOCK_FILE), 'utf8')).pid, process.pid, `took over ${JSON.stringify(holder)}`);
    release();
    assert.deepEqual(fs.readdirSync(dir), []);
  }
});

test('with DATABASE_URL no lock file is made', (t) => {
  if (!process.env.DATABASE_URL) {
    t.skip('PostgreSQL only (DATABASE_URL is not set)');
    return;
  }
  const dir = tempDir();
  const { db } = createDb({ databaseUrl: process.env.DATABASE_URL, dataDir: dir });
  cleanups.push(() => db.destroy());
  assert.deepEqual(fs.readdirSync(dir), []);
});

test('tributary serve holds DATA_DIR: a second serve and migrate refuse to start; a stale lock is taken over', { timeout: 180_000 }, async (t) => {
  if (process.env.DATABASE_URL) {
    t.skip('the lock guards the PGlite data directory; PostgreSQL needs none');
    return;
  }
  const dataDir = tempDir();
  const first: ChildProcess = spawn(NODE, ['src/main.ts', 'serve'], { cwd: ROOT, env: childEnv(dataDir), stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  first.stdout!.setEncoding('utf8').on('data', (s: string) => (out += s));
  first.stderr!.setEncoding('utf8').on('data', (s: string) => (out += s));
  const exited = new Promise<number | null>((resolve) => first.on('exit', (code) => resolve(code)));
  cleanups.push(async () => {
    if (first.exitCode === null && first.signalCode === null) {
      first.kill('SIGKILL');
      await exited;
    }
  });
  const deadline = Date.now() + 120_000;
  while (!out.includes('tributary listening')) {
    if (first.exitCode !== null) assert.fail(`serve exited with ${first.exitCode}: ${out}`);
    if (Date.now() > deadline) assert.fail(`serve did not start: ${out}`);
    await sleep(50);
  }

  // `worker` refuses earlier on PGlite, whatever holds the directory (test/cli covers it).
  for (const args of [['serve'], ['migrate']]) {
    const second = run(args, dataDir);
    assert.equal(second.status, 1, `${args[0]}: ${second.stderr}${second.stdout}`);
    assert.equal(second.stderr, `error: DATA_DIR ${dataDir} is in use by process ${first.pid}; stop that process or set another DATA_DIR\n`);
    assert.doesNotMatch(second.stdout, /listening|applied|up to date/);
  }

  first.kill('SIGTERM');
  assert.equal(await exited, 0, out);
  assert.equal(fs.existsSync(path.join(dataDir, LOCK_FILE)), false, 'released at exit');

  // A holder killed outright leaves its lock behind; the next start takes it over.
  writeLock(dataDir, { pid: deadPid() });
  const next = run(['migrate'], dataDir);
  assert.equal(next.status, 0, next.stderr);
  assert.equal(next.stdout, 'database is up to date\n');
  assert.equal(fs.existsSync(path.join(dataDir, LOCK_FILE)), false, 'released at exit');
});
