/**
 * The README's first task, run as a user would: its ```sh blocks in order in one bash
 * session, in a copy of the project directory, against a server on a fresh database. A
 * ```text block right after a ```sh block is what that block must print. Nothing is
 * changed in the blocks: the server listens on a free port instead of 8080, and the shell has
 * PORT set to it, as the README tells a newcomer to do.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig } from '../../src/config.ts';
import { serve } from '../../src/server.ts';
import { freshPostgresDatabase } from '../helpers/app.ts';
import { freePort, ROOT, runProcess, type CliRun } from '../helpers/cli.ts';

interface Block {
  lang: string;
  text: string;
}

/** The fenced blocks of the README section `heading`, in order. */
export function sectionBlocks(markdown: string, heading: string): Block[] {
  const start = markdown.indexOf(`\n${heading}\n`);
  assert.ok(start >= 0, `README has no section ${heading}`);
  const end = markdown.indexOf('\n## ', start + heading.length + 2);
  const section = markdown.slice(start, end < 0 ? undefined : end);
  return [...section.matchAll(/^```(\w+)\n([\s\S]*?)^```$/gm)].map((m) => ({ lang: m[1]!, text: m[2]! }));
}

const MARK = '@@ block done @@';

/** The environment of a newcomer's shell: none of the server's settings. */
function userShell(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!/^(TRIBUTARY_|PORT$|HOST$|DATA_DIR$|DATABASE_URL$|REDIS_URL$|LOG_LEVEL$)/.test(k)) env[k] = v;
  return env;
}

function bash(script: string, cwd: string, env: NodeJS.ProcessEnv): Promise<CliRun> {
  return runProcess('bash', ['-c', script], cwd, env);
}

test('the README first task runs as written and prints what it shows', { timeout: 240_000 }, async () => {
  const blocks = sectionBlocks(fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8'), '## Your first task');
  const sh = blocks.filter((b) => b.lang === 'sh');
  assert.ok(sh.length >= 4, 'the first task has its steps as sh blocks');

  // A project directory of its own, so ./.tributary and the NDJSON files land there.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tributary-readme-'));
  // What `npx tributary` needs: it installs this directory into npx's cache once, running
  // its prepare script (the console's build), as it would in a clone.
  for (const entry of ['package.json', 'node_modules', 'bin', 'src', 'scripts', 'console', 'packages'])
    fs.symlinkSync(path.join(ROOT, entry), path.join(dir, entry));
  const fresh = process.env.DATABASE_URL ? await freshPostgresDatabase() : undefined;
  const env: Record<string, string> = { DATA_DIR: path.join(dir, '.tributary'), PORT: '0', LOG_LEVEL: 'silent' };
  if (fresh) env.DATABASE_URL = fresh.url;
  const running = await serve(loadConfig(env), { http: true, worker: false });
  try {
    const port = new URL(running.url).port;
    assert.match(sh[0]!.text, /^set -euo pipefail\n/, 'the first block stops at the first failed command');
    const script = sh.map((b) => `${b.text}echo '${MARK}'`).join('\n');
    assert.notEqual(port, '8080');
    // The user's shell after `export PORT=...`: the blocks and the CLI find the server through it.
    const r = await bash(script, dir, { ...userShell(), PORT: port });
    assert.equal(r.code, 0, `the README's commands failed:\n${r.stderr}\n${r.stdout}`);
    const outputs = r.stdout.split(`${MARK}\n`);
    assert.equal(outputs.length, sh.length + 1, r.stdout);
    let checked = 0;
    blocks.forEach((b, i) => {
      const next = blocks[i + 1];
      if (b.lang !== 'sh' || next?.lang !== 'text') return;
      assert.equal(outputs[sh.indexOf(b)], next.text, `the output of block ${sh.indexOf(b) + 1} differs from what the README shows`);
      checked++;
    });
    assert.ok(checked >= 4, 'each step shows what it prints');
  } finally {
    await running.stop();
    await fresh?.drop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('a failed step of the first task stops there with its own message', { timeout: 60_000 }, async () => {
  const [first] = sectionBlocks(fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8'), '## Your first task').filter((b) => b.lang === 'sh');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tributary-readme-'));
  try {
    fs.mkdirSync(path.join(dir, '.tributary'));
    fs.writeFileSync(path.join(dir, '.tributary', 'bootstrap.json'), JSON.stringify({ client_id: 'tbci_x', client_secret: 'tbcs_x' }));
    // Nothing listens on the port: the token exchange is the step that fails.
    const port = String(await freePort());
    const r = await bash(`${first!.text}echo '${MARK}'`, dir, { ...userShell(), PORT: port });
    assert.notEqual(r.code, 0, 'the block went on after a failed command');
    assert.doesNotMatch(r.stdout, new RegExp(MARK));
    assert.match(r.stderr, new RegExp(`curl: \\(7\\) Failed to connect to 127\\.0\\.0\\.1 port ${port}`), r.stderr);
    assert.match(r.stderr, /expected r\.access_token in: nothing/);
    assert.doesNotMatch(r.stderr, /TypeError|SyntaxError|at .*:\d+:\d+/, 'no stack trace from the next pipe');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
