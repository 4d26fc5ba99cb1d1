/**
 * `tributary facts import` as a user meets it: --strict, a file that is not there, and a
 * server that shuts down in the middle of an import. The real CLI against a real server.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { IMPORT_BATCH } from '../../src/facts/import.ts';
import { loadConfig } from '../../src/config.ts';
import { serve, type Running } from '../../src/server.ts';
import { freshPostgresDatabase, seedTenant, startApp, type TestApp } from '../helpers/app.ts';
import { createModel, factCount } from '../facts/helpers.ts';
import { runCli as run } from '../helpers/cli.ts';

/** The CLI without this process's settings: only its options count. */
const runCli = (args: string[]) => run(args, { PATH: process.env.PATH, NO_COLOR: '1' });

let t: TestApp;
let tmp: string;

before(async () => {
  t = await startApp();
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tributary-import-cli-'));
});
after(async () => {
  await t.close();
  fs.rmSync(tmp, { recursive: true, force: true });
});

const factLine = (i: number) => JSON.stringify({ observed_at: '2025-03-01T00:00:00Z', data: { k: `k${i}` } });

test('--strict exits 1 when a line is rejected, 0 when none is; the summary is printed either way', async () => {
  const tenant = await seedTenant(t.deps);
  const model = await createModel(t.deps.db, tenant, [{ name: 'k', type: 'string', is_primary_key: true }]);
  const bad = path.join(tmp, 'bad.ndjson');
  const good = path.join(tmp, 'good.ndjson');
  fs.writeFileSync(bad, `${factLine(1)}\nnot json\n${factLine(2)}\n`);
  fs.writeFileSync(good, `${factLine(3)}\n`);
  const base = ['facts', 'import', '--workspace', tenant.workspaceId, '--data-model', model.slug, '--url', t.url, '--admin-token', t.adminToken];
  const [strictJson, strictHuman, lenient, clean] = await Promise.all([
    runCli([...base, '--strict', '--json', bad]),
    runCli([...base, '--strict', bad]),
    runCli([...base, '--json', bad]),
    runCli([...base, '--strict', '--json', good]),
  ]);
  assert.equal(strictJson.code, 1, strictJson.stderr);
  const doc = JSON.parse(strictJson.stdout);
  assert.equal(strictJson.stdout.trimEnd().split('\n').length, 1);
  assert.equal(doc.rejected, 1);
  assert.deepEqual(
    doc.errors.map((e: { line: number }) => e.line),
    [2],
  );
  assert.equal(strictJson.stderr, '');

  assert.equal(strictHuman.code, 1);
  assert.match(strictHuman.stdout, /^rejected: 1$/m);
  assert.equal(strictHuman.stderr, 'error: 1 of 3 lines were rejected (--strict)\n');

  assert.equal(lenient.code, 0, 'without --strict the valid lines count as success');
  assert.equal(clean.code, 0, clean.stderr);
  assert.equal(JSON.parse(clean.stdout).written, 1);
  assert.equal(await factCount(t.deps.db, model.id), 3);
});

test('a file that cannot be read says why and exits 1, not the usage code', async () => {
  const missing = path.join(tmp, 'nope.ndjson');
  const base = ['facts', 'import', '--workspace', '01890000-0000-7000-8000-000000000000', '--data-model', 'm', '--url', t.url, '--admin-token', t.adminToken];
  const [human, json, dir] = await Promise.all([runCli([...base, missing]), runCli([...base, '--json', missing]), runCli([...base, tmp])]);
  assert.deepEqual(human, { code: 1, stdout: '', stderr: `error: cannot read ${missing}: no such file\n` });
  assert.equal(json.code, 1);
  assert.deepEqual(JSON.parse(json.stdout), { error: `cannot read ${missing}: no such file`, status: null, code: 'file_unreadable' });
  assert.deepEqual(dir, { code: 1, stdout: '', stderr: `error: ${tmp} is not a file\n` });
});

test('an import cut off by a server shutting down says how many lines were stored', { timeout: 120_000 }, async () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tributary-cutoff-'));
  const fresh = process.env.DATABASE_URL ? await freshPostgresDatabase() : undefined;
  const env: Record<string, string> = {
    DATA_DIR: dataDir,
    PORT: '0',
    LOG_LEVEL: 'silent',
    SHUTDOWN_GRACE_MS: '0',
    TRIBUTARY_ADMIN_TOKEN: `tbadm_${randomBytes(32).toString('base64url')}`,
  };
  if (fresh) env.DATABASE_URL = fresh.url;
  const start = () => serve(loadConfig(env), { http: true, worker: false });
  let running: Running | undefined = await start();
  try {
    const tenant = await seedTenant(running.deps);
    const model = await createModel(running.deps.db, tenant, [{ name: 'k', type: 'string', is_primary_key: true }]);
    // Far more than is stored before the shutdown below.
    const file = path.join(tmp, 'long.ndjson');
    fs.writeFileSync(file, `${Array.from({ length: 200_000 }, (_, i) => factLine(i)).join('\n')}\n`);
    const cli = runCli([
      'facts',
      'import',
      '--workspace',
      tenant.workspaceId,
      '--data-model',
      model.slug,
      '--url',
      running.url,
      '--admin-token',
      env.TRIBUTARY_ADMIN_TOKEN!,
      '--json',
      file,
    ]);
    // Two batches stored: the server has told the client about at least the first.
    const deps = running.deps;
    const batching = IMPORT_BATCH[deps.engine];
    while ((await factCount(deps.db, model.id)) < 2000) await new Promise((r) => setTimeout(r, 20));
    await running.stop();
    running = undefined;
    const r = await cli;
    assert.equal(r.code, 1, r.stderr);
    const doc = JSON.parse(r.stdout);
    assert.equal(doc.code, 'connection_closed');
    const n = Number(/^the server closed the connection after (\d+) lines were stored/.exec(doc.error)?.[1]);
    // A count of whole batches: of a fixed size on PostgreSQL, sized by time on PGlite.
    assert.ok(n >= 1 && (batching.ms !== undefined || n % batching.lines === 0), doc.error);
    assert.match(doc.error, /; run the same import again when the server is back: stored lines count as duplicates$/);
    assert.doesNotMatch(doc.error, /cannot reach/);

    // What was reported stored is stored (a batch in flight at the cut may be stored too).
    running = await start();
    assert.ok((await factCount(running.deps.db, model.id)) >= n);
  } finally {
    await running?.stop();
    await fresh?.drop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
});
