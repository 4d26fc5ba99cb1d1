import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { seedTenant, startApp, tokenFor, type Tenant, type TestApp } from '../helpers/app.ts';
import { createModel, factCount, recomputedCurrent, storedCurrent, type TestModel } from './helpers.ts';
import { progressLine, renderImportSummary, upload } from '../../src/cli/facts-import.ts';
import { ROOT, runCli } from '../helpers/cli.ts';

let t: TestApp;
let tenant: Tenant;
let model: TestModel;
let tmp: string;

before(async () => {
  t = await startApp();
  tenant = await seedTenant(t.deps);
  model = await createModel(t.deps.db, tenant, [
    { name: 'k', type: 'string', is_primary_key: true, is_required: true },
    { name: 'amount', type: 'integer', is_required: true },
    { name: 'at', type: 'datetime' },
    { name: 'note', type: 'string' },
  ]);
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tributary-facts-import-'));
});
after(async () => {
  await t.close();
  fs.rmSync(tmp, { recursive: true, force: true });
});

function importUrl(workspaceId: string, slug: string): string {
  return `${t.url}/admin/v1/facts/import?${new URLSearchParams({ workspace_id: workspaceId, data_model: slug })}`;
}

/** Streams `text` in uneven chunks, so lines are split across chunk boundaries. */
async function postNdjson(url: string, text: string, headers: Record<string, string> = {}) {
  const buf = Buffer.from(text);
  async function* chunks() {
    let at = 0;
    for (let i = 0; at < buf.length; i++) {
      const n = 1 + ((i * 7919) % 65_536);
      yield buf.subarray(at, at + n);
      at += n;
    }
  }
  const res = await fetch(url, {
    method: 'POST',
    headers: { authorization: `Bearer ${t.adminToken}`, 'content-type': 'application/x-ndjson', ...headers },
    body: Readable.from(chunks()),
    duplex: 'half',
  });
  const body = await res.text();
  return { status: res.status, body: body ? JSON.parse(body) : undefined };
}

interface Expected {
  text: string;
  lines: number;
  written: number;
  duplicates: number;
  rejected: Array<{ line: number; pointer?: string; detail: RegExp | string }>;
}

/** ~20k lines: valid facts of 500 entities, with non-JSON lines, invalid facts, blank lines, CRLF endings and repeated lines. */
function generate(lineCount: number): Expected {
  const out: string[] = [];
  const exp: Expected = { text: '', lines: lineCount, written: 0, duplicates: 0, rejected: [] };
  for (let n = 1; n <= lineCount; n++) {
    const fact = {
      observed_at: new Date(Date.UTC(2025, 0, 1) + ((n * 7919) % 100_000) * 60_000).toISOString(),
      data: { k: `e${n % 500}`, amount: n, at: '2025-01-01T01:00:00+01:00' },
    };
    let line: string;
    if (n % 1000 === 500) {
      line = `{"observed_at": "2025-01-01T00:00:00Z", "data": {`;
      exp.rejected.push({ line: n, detail: /^the line is not JSON/ });
    } else if (n % 997 === 0) {
      line = JSON.stringify({ ...fact, data: { ...fact.data, amount: 'many' } });
      exp.rejected.push({ line: n, pointer: '/data/amount', detail: 'must be a whole number between -9007199254740991 and 9007199254740991' });
    } else if (n % 1999 === 0) {
      line = JSON.stringify({ observed_at: fact.observed_at, data: { k: 'x', amount: 1, extra: true } });
      exp.rejected.push({ line: n, pointer: '/data/extra', detail: 'is not a field of the data model' });
    } else if (n % 2500 === 0) {
      line = '   ';
    } else if (n % 1500 === 0) {
      line = out[out.length - 1]!.replace(/\r$/, '');
      exp.duplicates++;
    } else {
      line = JSON.stringify(fact);
      exp.written++;
    }
    out.push(n % 3 === 0 ? `${line}\r` : line);
  }
  exp.text = `${out.join('\n')}\n`;
  return exp;
}

describe('POST /admin/v1/facts/import', () => {
  test('refuses a request without the admin token, of another media type, or for an unknown target', async () => {
    const line = '{"observed_at":"2025-01-01T00:00:00Z","data":{"k":"a","amount":1}}\n';
    const noToken = await fetch(importUrl(tenant.workspaceId, model.slug), { method: 'POST', headers: { 'content-type': 'application/x-ndjson' }, body: line });
    assert.equal(noToken.status, 401);
    const json = await postNdjson(importUrl(tenant.workspaceId, model.slug), line, { 'content-type': 'application/json' });
    assert.equal(json.status, 415);
    assert.equal(json.body.errors[0].code, 'unsupported_media_type');
    const unknownModel = await postNdjson(importUrl(tenant.workspaceId, 'no-such-model'), line);
    assert.equal(unknownModel.status, 404);
    const other = await seedTenant(t.deps);
    const otherWorkspace = await postNdjson(importUrl(other.workspaceId, model.slug), line);
    assert.equal(otherWorkspace.status, 404, 'a model of another workspace is not found');
    const badId = await postNdjson(importUrl('nope', model.slug), line);
    assert.equal(badId.status, 400);
    assert.deepEqual(badId.body.errors[0].source, { parameter: 'workspace_id' });
    assert.equal(await factCount(t.deps.db, model.id), 0);
  });

  test('imports ~20k streamed lines in batches, reporting rejected lines by number', async () => {
    const exp = generate(20_000);
    const res = await postNdjson(importUrl(tenant.workspaceId, model.slug), exp.text);
    assert.equal(res.status, 200);
    const d = res.body.data;
    assert.equal(d.lines, exp.lines);
    assert.equal(d.written, exp.written);
    assert.equal(d.duplicates, exp.duplicates);
    assert.equal(d.rejected, exp.rejected.length);
    assert.equal(d.errors_omitted, 0);
    assert.equal(d.errors.length, exp.rejected.length);
    exp.rejected.forEach((e, i) => {
      const got = d.errors[i];
      assert.equal(got.line, e.line);
      assert.equal(got.pointer, e.pointer);
      if (typeof e.detail === 'string') assert.equal(got.detail, e.detail);
      else assert.match(got.detail, e.detail);
    });
    assert.equal(await factCount(t.deps.db, model.id), exp.written);
    assert.deepEqual(await storedCurrent(t.deps.db, model.id), await recomputedCurrent(t.deps.db, model.id));
    const sample = await t.deps.db.selectFrom('facts').select('data').where('data_model_id', '=', model.id).limit(1).executeTakeFirstOrThrow();
    assert.equal((sample.data as { at: string }).at, '2025-01-01T00:00:00.000Z');

    // Sending the same file again stores nothing twice.
    const again = await postNdjson(importUrl(tenant.workspaceId, model.slug), exp.text);
    assert.equal(again.body.data.written, 0);
    assert.equal(again.body.data.duplicates, exp.written + exp.duplicates);
    assert.equal(await factCount(t.deps.db, model.id), exp.written);
  });

  test('lists the first 1000 errors and counts the rest', async () => {
    const text = Array.from({ length: 1_200 }, (_, i) =>
      i === 600 ? '{"observed_at":"2025-01-01T00:00:00Z","data":{"k":"cap","amount":1}}' : `not json ${i}`,
    ).join('\n');
    const res = await postNdjson(importUrl(tenant.workspaceId, model.slug), text);
    assert.equal(res.status, 200);
    const d = res.body.data;
    assert.equal(d.written, 1);
    assert.equal(d.rejected, 1_199);
    assert.equal(d.errors.length, 1_000);
    assert.equal(d.errors_omitted, 199);
    assert.deepEqual(
      d.errors.slice(599, 602).map((e: { line: number }) => e.line),
      [600, 602, 603],
    );
  });

  test('a line over 1 MiB is rejected by its number, unread, and the lines around it are imported', async () => {
    // Padded in a non-key field: a primary key is at most 512 characters.
    const fact = (k: string, pad = '') => JSON.stringify({ observed_at: '2025-02-01T00:00:00Z', data: { k, amount: 1, note: pad } });
    // The longest line read is 1,048,576 bytes (its CRLF ending aside): pad a fact to exactly that.
    const exact = (k: string) => fact(k, 'x'.repeat(1024 * 1024 - Buffer.byteLength(fact(k))));
    const lines = [
      fact('long-1'),
      fact('long-2', 'y'.repeat(3 * 1024 * 1024)),
      `${exact('long-3')}\r`,
      `${exact('long-4')}é`,
      fact('long-5'),
      `${'['.repeat(1024 * 1024 + 1)}`,
    ];
    assert.equal(Buffer.byteLength(exact('long-3')), 1024 * 1024);
    const res = await postNdjson(importUrl(tenant.workspaceId, model.slug), lines.join('\n'));
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const d = res.body.data;
    assert.equal(d.lines, 6);
    assert.equal(d.written, 3);
    assert.deepEqual(d.errors, [
      { line: 2, detail: 'the line is longer than 1048576 bytes' },
      { line: 4, detail: 'the line is longer than 1048576 bytes' },
      { line: 6, detail: 'the line is longer than 1048576 bytes' },
    ]);
  });

  test('an empty body imports nothing', async () => {
    const res = await postNdjson(importUrl(tenant.workspaceId, model.slug), '');
    assert.equal(res.status, 200);
    assert.deepEqual(res.body.data, { lines: 0, written: 0, duplicates: 0, rejected: 0, errors: [], errors_omitted: 0 });
  });
});

describe('tributary facts import', () => {
  test('streams a file and prints one JSON document with --json', async () => {
    const cliModel = await createModel(t.deps.db, tenant, [
      { name: 'k', type: 'string', is_primary_key: true },
      { name: 'amount', type: 'integer' },
    ]);
    const file = path.join(tmp, 'facts.ndjson');
    const lines = Array.from({ length: 3000 }, (_, i) =>
      JSON.stringify({ observed_at: new Date(Date.UTC(2025, 0, 1, 0, i)).toISOString(), data: { k: `c${i % 50}`, amount: i } }),
    );
    lines[41] = '{"observed_at": "soon", "data": {"k": "x"}}';
    lines[2999] = 'oops';
    fs.writeFileSync(file, `${lines.join('\n')}\n`);

    const r = await runCli([
      'facts',
      'import',
      '--workspace',
      tenant.workspaceId,
      '--data-model',
      cliModel.slug,
      file,
      '--json',
      '--url',
      t.url,
      '--admin-token',
      t.adminToken,
    ]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stderr, '', 'no progress bar when stderr is not a terminal');
    const docs = r.stdout.trim().split('\n');
    assert.equal(docs.length, 1, 'exactly one JSON document');
    const d = JSON.parse(docs[0]!);
    assert.equal(d.written, 2998);
    assert.equal(d.rejected, 2);
    assert.deepEqual(
      d.errors.map((e: { line: number }) => e.line),
      [42, 3000],
    );
    assert.equal(await factCount(t.deps.db, cliModel.id), 2998);

    // Without --json: the summary for a person, every rejected line with its pointer and reason.
    const human = await runCli([
      'facts',
      'import',
      '--workspace',
      tenant.workspaceId,
      '--data-model',
      cliModel.slug,
      file,
      '--url',
      t.url,
      '--admin-token',
      t.adminToken,
    ]);
    assert.equal(human.code, 0, human.stderr);
    assert.equal(
      human.stdout,
      [
        'written: 0',
        'duplicates: 2998',
        'rejected: 2',
        '  line 42: /observed_at must be an ISO 8601 date-time with Z or a UTC offset',
        `  line 3000: ${d.errors[1].detail}`,
        '',
      ].join('\n'),
    );

    const missing = await runCli([
      'facts',
      'import',
      '--workspace',
      tenant.workspaceId,
      '--data-model',
      'no-such-model',
      file,
      '--json',
      '--url',
      t.url,
      '--admin-token',
      t.adminToken,
    ]);
    assert.equal(missing.code, 1);
    const err = JSON.parse(missing.stdout.trim());
    assert.equal(err.status, 404);
    assert.equal(err.code, 'not_found');
  });
});

test('refused before the file is sent (an unknown model), the CLI stops sending and exits', { timeout: 30_000 }, async () => {
  // Far more than socket buffers hold: the server never reads it, so a client that kept
  // sending would wait for the server's idle timeout (72 s) before it could exit.
  const file = path.join(tmp, 'refused.ndjson');
  fs.writeFileSync(file, `${JSON.stringify({ observed_at: '2025-03-01T00:00:00Z', data: { k: 'x'.repeat(1000) } })}\n`.repeat(16_000));
  const r = await runCli([
    'facts',
    'import',
    '--workspace',
    tenant.workspaceId,
    '--data-model',
    'no-such-model',
    file,
    '--json',
    '--url',
    t.url,
    '--admin-token',
    t.adminToken,
  ]);
  assert.equal(r.code, 1, r.stderr);
  assert.equal(JSON.parse(r.stdout).status, 404);
});

test('on a terminal, a progress bar is drawn in place on stderr and cleared before the summary', async () => {
  const m = await createModel(t.deps.db, tenant, [{ name: 'k', type: 'string', is_primary_key: true }]);
  const file = path.join(tmp, 'progress.ndjson');
  fs.writeFileSync(file, Array.from({ length: 20_000 }, (_, i) => JSON.stringify({ observed_at: '2025-03-01T00:00:00Z', data: { k: `p${i}` } })).join('\n'));
  let err = '';
  const answer = await upload({ url: t.url, adminToken: t.adminToken }, tenant.workspaceId, m.slug, file, {
    out: () => {},
    err: (x) => (err += x),
    errIsTTY: () => true,
  });
  assert.equal(answer.written, 20_000);
  const size = fs.statSync(file).size;
  const ERASE = '\r\x1b[2K';
  assert.ok(err.startsWith(ERASE), 'drawn in place');
  assert.match(err.slice(ERASE.length), /^\[[#-]{30}\] +\d+% /);
  assert.ok(err.includes(`${progressLine(size, size)} sent; waiting for the server to finish`));
  assert.ok(err.endsWith(ERASE), 'cleared at the end');
  assert.equal(progressLine(512, 2048, 8), '[##------]  25% 512 B / 2.0 KiB');
  assert.equal(
    renderImportSummary({ written: 1, duplicates: 0, rejected: 1001, errors: [{ line: 7, detail: 'bad' }], errors_omitted: 1000 }),
    'written: 1\nduplicates: 0\nrejected: 1001\n  line 7: bad\n  ... and 1000 more errors\n',
  );
});

// The CLI sends from another process, so the whole body is there to be read at once: on
// PGlite, whose statements run on the event loop's thread, nothing else was answered until
// the import ended. "Before the end" is observed, not timed: the import's response has not
// been sent when the other answers come back, and the read counts fewer facts than were sent.
test('/healthz and an authenticated read are answered while an import is still running', async () => {
  // About 480 kB: read from the socket in one go, and many batches on either engine.
  const LINES = 6000;
  const m = await createModel(t.deps.db, tenant, [
    { name: 'k', type: 'string', is_primary_key: true },
    { name: 'amount', type: 'integer' },
  ]);
  const token = await tokenFor(t, tenant);
  const file = path.join(tmp, 'interleave.ndjson');
  // One entity per line, so the latest-per-entity count is the number of facts stored.
  const lines = Array.from({ length: LINES }, (_, i) =>
    JSON.stringify({ observed_at: new Date(Date.UTC(2025, 0, 1, 0, 0, i)).toISOString(), data: { k: `e${i}`, amount: i } }),
  );
  fs.writeFileSync(file, `${lines.join('\n')}\n`);

  let importAnswered = false;
  const importStarted = new Promise<void>((resolve) => {
    const onRequest = (req: IncomingMessage, res: ServerResponse) => {
      if (!req.url?.startsWith('/admin/v1/facts/import')) return;
      t.app.server.off('request', onRequest);
      res.once('finish', () => (importAnswered = true));
      resolve();
    };
    t.app.server.on('request', onRequest);
  });

  const cli = spawn(
    process.execPath,
    [
      'src/main.ts',
      'facts',
      'import',
      '--workspace',
      tenant.workspaceId,
      '--data-model',
      m.slug,
      file,
      '--json',
      '--url',
      t.url,
      '--admin-token',
      t.adminToken,
    ],
    { cwd: ROOT, env: { ...process.env, NO_COLOR: '1' }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let stdout = '';
  let stderr = '';
  cli.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  cli.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const exited = new Promise<number | null>((resolve) => cli.on('close', resolve));

  await importStarted;
  const health = fetch(`${t.url}/healthz`).then(async (res) => ({ status: res.status, importAnswered }));
  const read = fetch(`${t.url}/api/graphql`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ query: 'query($slug: String!) { factQuery(dataModelSlug: $slug, limit: 1) { count } }', variables: { slug: m.slug } }),
  }).then(async (res) => ({ status: res.status, body: (await res.json()) as { data?: { factQuery?: { count?: number } } }, importAnswered }));

  const h = await health;
  assert.equal(h.status, 200);
  assert.equal(h.importAnswered, false, '/healthz was answered only once the import was done');
  const r = await read;
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.equal(r.importAnswered, false, 'the read was answered only once the import was done');
  const counted = r.body.data?.factQuery?.count;
  assert.ok(typeof counted === 'number' && counted < LINES, `the read saw ${counted} of ${LINES} facts: it ran after the import`);

  assert.equal(await exited, 0, stderr);
  const summary = JSON.parse(stdout) as { written: number; rejected: number };
  assert.equal(summary.written, LINES);
  assert.equal(summary.rejected, 0);
});
