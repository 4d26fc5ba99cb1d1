/**
 * Two `tributary worker` processes on one PostgreSQL and one schedule firing every second
 * for 30 seconds: exactly 30 runs, one per tick. (PGlite is one process's database.)
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { saveOk, startFlow } from '../webhooks/helpers.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const NODE = path.join(ROOT, 'node_modules/.bin/node');

interface Child {
  child: ChildProcess;
  output: () => string;
  exited: Promise<unknown>;
}

function spawnWorker(databaseUrl: string): Child {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tributary-sched-'));
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!/^(TRIBUTARY_|PORT$|HOST$|DATA_DIR$|DATABASE_URL$|LOG_LEVEL$)/.test(k)) env[k] = v;
  }
  Object.assign(env, { DATA_DIR: dataDir, DATABASE_URL: databaseUrl, LOG_LEVEL: 'debug' });
  const child = spawn(NODE, ['src/main.ts', 'worker'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.setEncoding('utf8').on('data', (s: string) => (out += s));
  child.stderr!.setEncoding('utf8').on('data', (s: string) => (out += s));
  const exited = new Promise((resolve) => child.on('exit', resolve));
  after(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await exited;
    }
    fs.rmSync(dataDir, { recursive: true, force: true });
  });
  return { child, output: () => out, exited };
}

async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

test('two worker processes, one schedule every second for 30 s: exactly 30 runs', { skip: !process.env.DATABASE_URL, timeout: 240_000 }, async (t) => {
  const f = await startFlow({}, { worker: false });
  const workers = [spawnWorker(f.t.config.databaseUrl!), spawnWorker(f.t.config.databaseUrl!)];
  for (const w of workers) await until('a worker to start', () => w.output().includes('"worker started"') || w.child.exitCode !== null, 90_000);
  for (const w of workers) assert.equal(w.child.exitCode, null, w.output());

  // The window: 30 whole seconds inside one minute, starting a few seconds from now.
  let start = Math.ceil((Date.now() + 5000) / 1000) * 1000;
  if (new Date(start).getUTCSeconds() > 30) start = Math.ceil(start / 60_000) * 60_000;
  const d = new Date(start);
  const s = d.getUTCSeconds();
  const cron = `${s}-${s + 29} ${d.getUTCMinutes()} ${d.getUTCHours()} ${d.getUTCDate()} ${d.getUTCMonth() + 1} *`;
  const { workflow } = await saveOk(f, {
    step_params: [{ key: 'echo', type: 'transform', config: { expression: 'payload' } }],
    trigger_params: [{ key: 'every_second', type: 'schedule', cron }],
  });

  const runs = () =>
    f.t.deps.db.selectFrom('workflow_runs').select(['id', 'status', 'payload', 'trigger_key']).where('workflow_id', '=', workflow.id).execute();
  const end = start + 29_000;
  await until('the window to pass', () => Date.now() > end + 3000, 120_000);
  await until('the runs to finish', async () => (await runs()).every((r) => r.status === 'succeeded'), 30_000);
  const made = await runs();
  const ticks = made.map((r) => (r.payload as { scheduled_at: string }).scheduled_at).sort();
  const expected = Array.from({ length: 30 }, (_, i) => new Date(start + i * 1000).toISOString());
  assert.deepEqual(ticks, expected);
  assert.equal(made.length, 30);
  assert.ok(made.every((r) => r.trigger_key === 'every_second'));

  // Which process made them (each wins the ticks it reaches first).
  const split = workers.map(
    (w) =>
      w
        .output()
        .split('\n')
        .filter((l) => l.includes('"schedule tick fired"')).length,
  );
  assert.equal(split[0]! + split[1]!, 30);
  t.diagnostic(`runs made per process: ${split.join(' + ')}`);

  for (const w of workers) w.child.kill('SIGTERM');
  await Promise.all(workers.map((w) => w.exited));
});
