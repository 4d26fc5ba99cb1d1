/**
 * `tributary facts export` as a user runs it: the real command against a real server, as a
 * service account (its credentials in a bootstrap.json). Every matching fact comes out once
 * in both formats, across pages whose facts share one instant, across timeline windows
 * longer than factQuery's 366 days, from a first fact years back; and the process's memory
 * does not grow with the number of facts.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { writeFacts } from '../../src/facts/write.ts';
import { seedTenant, startApp, type Tenant, type TestApp } from '../helpers/app.ts';
import { ROOT, runProcess, type CliRun } from '../helpers/cli.ts';
import { createModel, type TestModel } from '../facts/helpers.ts';
import { parseCsv } from './csv-parse.ts';
import { Writable } from 'node:stream';
import { createApiClient } from '../../src/cli/api-client.ts';
import { exportFacts } from '../../src/cli/facts-export.ts';

let t: TestApp;
let tenant: Tenant;
let dir: string;
let dataDir: string;

before(async () => {
  t = await startApp();
  tenant = await seedTenant(t.deps);
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tributary-export-cli-'));
  dataDir = path.join(dir, 'data');
  fs.mkdirSync(dataDir);
  fs.writeFileSync(path.join(dataDir, 'bootstrap.json'), JSON.stringify({ client_id: tenant.clientId, client_secret: tenant.clientSecret }), { mode: 0o600 });
});
after(async () => {
  await t.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** `tributary ARGS` as the tenant's account; `preload` is a module node loads first. */
function cli(args: string[], opts: { preload?: string } = {}): Promise<CliRun> {
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, NO_COLOR: '1', DATA_DIR: dataDir, TRIBUTARY_URL: t.url };
  return runProcess(process.execPath, [...(opts.preload ? ['--import', opts.preload] : []), 'src/main.ts', ...args], ROOT, env, '');
}

const ok = (r: CliRun) => {
  assert.equal(r.code, 0, `exit ${r.code}\n${r.stderr}`);
  return r;
};

interface Seeded {
  model: TestModel;
  /** Every fact: id, entity, observed_at (ISO), data. */
  facts: Array<{ id: string; entity: string; observedAt: string; data: Record<string, unknown> }>;
}

const FIELDS = [
  { name: 'k', type: 'string' as const, is_primary_key: true },
  { name: 'n', type: 'integer' as const },
  { name: 'note', type: 'string' as const },
  { name: 'ok', type: 'boolean' as const },
  { name: 'meta', type: 'map' as const },
  { name: 'id', type: 'string' as const },
];

/** Strings a CSV writer must quote, or keep apart from a missing value. */
const AWKWARD = ['', 'a,b', 'say "hi"', 'two\nlines', 'cr\r\nlf', ' padded ', 'naïve ☃', '"', ','];

async function seed(items: Array<{ observed_at: string; data: Record<string, unknown> }>, model: TestModel): Promise<void> {
  const scope = { organizationId: tenant.organizationId, workspaceId: tenant.workspaceId };
  for (let i = 0; i < items.length; i += 1000) {
    const r = await writeFacts(t.deps.db, scope, model, items.slice(i, i + 1000));
    assert.deepEqual(r.errors, []);
  }
}

async function stored(model: TestModel): Promise<Seeded['facts']> {
  const { rows } = await sql<{ id: string; entity_id: string; observed_at: Date; data: unknown }>`
    select id, entity_id, observed_at, data from facts where data_model_id = ${model.id}`.execute(t.deps.db);
  return rows.map((r) => ({
    id: r.id,
    entity: r.entity_id,
    observedAt: r.observed_at.toISOString(),
    data: (typeof r.data === 'string' ? JSON.parse(r.data) : r.data) as Record<string, unknown>,
  }));
}

describe('facts export', () => {
  let s: Seeded;
  before(async () => {
    const model = await createModel(t.deps.db, tenant, FIELDS);
    const items: Array<{ observed_at: string; data: Record<string, unknown> }> = [];
    // 600 facts at one instant: pages of 250 whose facts all share their cursor's instant.
    for (let i = 0; i < 600; i++) items.push({ observed_at: '2024-05-01T12:00:00.000Z', data: { k: `tie-${i}`, n: i } });
    // A first fact years before the rest, and facts spread over three years (windows of 366 days).
    items.push({ observed_at: '2009-02-13T23:31:30.000Z', data: { k: 'first', note: 'the oldest' } });
    for (let i = 0; i < 900; i++) {
      const at = new Date(Date.parse('2023-01-01T00:00:00Z') + i * 1.3 * 86_400_000).toISOString();
      items.push({
        observed_at: at,
        data: {
          k: `e-${i % 300}`,
          n: i,
          note: AWKWARD[i % AWKWARD.length],
          ok: i % 3 === 0 ? null : i % 2 === 0,
          meta: { i, tags: ['x', 'y,z'] },
          id: `own-${i}`,
        },
      });
    }
    await seed(items, model);
    s = { model, facts: await stored(model) };
    assert.equal(s.facts.length, 1501);
  });

  it('timeline NDJSON: every fact once, oldest first, with its data', async () => {
    const r = ok(await cli(['facts', 'export', '--data-model', s.model.slug, '--mode', 'timeline', '--format', 'ndjson']));
    assert.equal(r.stderr, '', 'no progress line when stderr is not a terminal');
    const lines = r.stdout
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l) as { id: string; entity_id: string; observed_at: string; inserted_at: string; data: unknown });
    assert.equal(lines.length, s.facts.length);
    assert.equal(new Set(lines.map((l) => l.id)).size, lines.length, 'no fact twice');
    const byId = new Map(s.facts.map((f) => [f.id, f]));
    for (const l of lines) {
      const f = byId.get(l.id);
      assert.ok(f, `${l.id} is a stored fact`);
      assert.deepEqual([l.entity_id, l.observed_at, l.data], [f.entity, f.observedAt, f.data]);
      assert.match(l.inserted_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    }
    const times = lines.map((l) => l.observed_at);
    assert.deepEqual(times, [...times].sort(), 'oldest first');
    assert.equal(lines[0]!.observed_at, '2009-02-13T23:31:30.000Z');
  });

  it('timeline CSV: the header, every fact once, values quoted so that they read back the same', async () => {
    const out = path.join(dir, 'facts.csv');
    const r = ok(await cli(['--json', 'facts', 'export', '--data-model', s.model.slug, '--mode', 'timeline', '--format', 'csv', '--output', out]));
    assert.deepEqual(JSON.parse(r.stdout), { exported: s.facts.length, output: out });
    const text = fs.readFileSync(out, 'utf8');
    assert.ok(text.endsWith('\r\n'));
    const [header, ...rows] = parseCsv(text);
    // The fields were added together: by name.
    assert.deepEqual(header, ['id', 'entity_id', 'observed_at', 'inserted_at', 'data.id', 'k', 'meta', 'n', 'note', 'ok']);
    assert.equal(rows.length, s.facts.length);
    assert.equal(new Set(rows.map((row) => row[0])).size, rows.length);
    const byId = new Map(s.facts.map((f) => [f.id, f]));
    const text_ = (v: unknown) => (v === undefined || v === null ? null : typeof v === 'string' ? v : JSON.stringify(v));
    for (const row of rows) {
      const f = byId.get(row[0]!)!;
      assert.ok(f);
      assert.deepEqual(row.slice(1, 3), [f.entity, f.observedAt]);
      assert.deepEqual(
        row.slice(4),
        ['id', 'k', 'meta', 'n', 'note', 'ok'].map((name) => text_(f.data[name])),
      );
    }
    assert.deepEqual(
      fs.readdirSync(dir).filter((n) => n.includes('partial')),
      [],
      'no partial file left',
    );
  });

  it('latest: one row per entity, the current fact; --since, --until and --filters select as factQuery does', async () => {
    const current = await sql<{ fact_id: string }>`select fact_id from fact_current where data_model_id = ${s.model.id} and axis = 'observed_at'`.execute(
      t.deps.db,
    );
    const [all, since, asOf, filtered] = await Promise.all([
      cli(['facts', 'export', '--data-model', s.model.slug, '--format', 'ndjson']),
      cli(['facts', 'export', '--data-model', s.model.slug, '--format', 'ndjson', '--since', '2024-06-01T00:00:00Z']),
      cli(['facts', 'export', '--data-model', s.model.slug, '--format', 'ndjson', '--until', '2024-05-01T12:00:00Z']),
      cli(['facts', 'export', '--data-model', s.model.slug, '--format', 'ndjson', '--filters', '[{"field":"k","op":"starts_with","value":"tie-"}]']),
    ]);
    const ids = (r: CliRun) =>
      ok(r)
        .stdout.trimEnd()
        .split('\n')
        .filter((l) => l !== '')
        .map((l) => JSON.parse(l) as { id: string; entity_id: string; observed_at: string });
    const got = ids(all);
    assert.deepEqual(got.map((f) => f.id).sort(), current.rows.map((r) => r.fact_id).sort());
    assert.equal(new Set(got.map((f) => f.entity_id)).size, got.length);
    const expectedSince = got.filter((f) => f.observed_at >= '2024-06-01T00:00:00.000Z');
    assert.deepEqual(
      ids(since)
        .map((f) => f.id)
        .sort(),
      expectedSince.map((f) => f.id).sort(),
    );
    // As of the tie instant: the 600 tie entities, the first fact and each e-* entity's fact up to then.
    const upTo = new Map<string, Seeded['facts'][number]>();
    for (const f of s.facts.filter((x) => x.observedAt <= '2024-05-01T12:00:00.000Z').sort((a, b) => a.observedAt.localeCompare(b.observedAt)))
      upTo.set(f.entity, f);
    assert.deepEqual(
      ids(asOf)
        .map((f) => f.id)
        .sort(),
      [...upTo.values()].map((f) => f.id).sort(),
    );
    assert.equal(ids(filtered).length, 600);
  });

  it('errors in the CLI style: a bad option is a usage error (2), an unknown model or bad filter exits 1 with the reason', async () => {
    const [format, since, unknown, unknownCsv, filter] = await Promise.all([
      cli(['facts', 'export', '--data-model', s.model.slug, '--format', 'xml']),
      cli(['facts', 'export', '--data-model', s.model.slug, '--format', 'csv', '--since', 'yesterday']),
      cli(['facts', 'export', '--data-model', 'nope', '--format', 'ndjson']),
      cli(['facts', 'export', '--data-model', 'nope', '--format', 'csv']),
      cli(['facts', 'export', '--data-model', s.model.slug, '--format', 'ndjson', '--filters', '[{"field":"zzz","op":"eq","value":1}]']),
    ]);
    assert.equal(format.code, 2);
    assert.match(format.stderr, /argument 'xml' is invalid\. Allowed choices are ndjson, csv/);
    assert.deepEqual([since.code, since.stdout], [2, '']);
    assert.match(since.stderr, /^error: --since must be an ISO 8601 date-time/);
    for (const r of [unknown, unknownCsv]) assert.deepEqual(r, { code: 1, stdout: '', stderr: 'error: no data model "nope" in the account\'s workspace\n' });
    assert.equal(filter.code, 1);
    assert.match(filter.stderr, /zzz.*graphql_validation/);
  });

  it('backpressure: the next page is asked for only once a slow output has taken the last one', async () => {
    const client = createApiClient({ url: t.url, credentials: { clientId: tenant.clientId, clientSecret: tenant.clientSecret, source: 'test' } });
    let fetched = 0;
    let written = 0;
    let most = 0;
    const pages = client.factPages.bind(client);
    client.factPages = async function* (v) {
      for await (const page of pages(v)) {
        fetched += page.length;
        yield page;
      }
    };
    // A reader of 16 KiB that takes a while with each chunk.
    const sink = new Writable({
      highWaterMark: 16 * 1024,
      write(chunk: Buffer, _enc, done) {
        written += chunk.toString().split('\n').length - 1;
        most = Math.max(most, fetched - written);
        setTimeout(done, 2);
      },
    });
    const n = await exportFacts(client, { dataModel: s.model.slug, mode: 'timeline', timeAxis: 'observed_at', format: 'ndjson' }, sink, {
      out: () => undefined,
      err: () => undefined,
    });
    assert.deepEqual([n, fetched, written], [s.facts.length, s.facts.length, s.facts.length]);
    assert.ok(most <= 250, `at most one page held beyond what the output took, saw ${most}`);
  });

  it('a terminal gets a progress line on stderr, redrawn in place and cleared at the end', async () => {
    const client = createApiClient({ url: t.url, credentials: { clientId: tenant.clientId, clientSecret: tenant.clientSecret, source: 'test' } });
    let err = '';
    let out = '';
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        out += chunk.toString();
        done();
      },
    });
    let now = 0;
    const io = { out: () => undefined, err: (x: string) => (err += x), errIsTTY: () => true };
    const o = { dataModel: s.model.slug, mode: 'timeline' as const, timeAxis: 'observed_at' as const, format: 'ndjson' as const };
    const n = await exportFacts(client, o, sink, io, () => (now += 1000));
    assert.equal(n, s.facts.length);
    const frames = err.split('\r\x1b[2K');
    assert.equal(frames.shift(), '');
    assert.equal(frames.pop(), '', 'cleared at the end');
    assert.ok(frames.length >= Math.ceil(s.facts.length / 250), `a frame a page: ${frames.length}`);
    assert.equal(frames[0], '1 fact, up to 2009-02-13T23:31:30.000Z', 'the first window holds the first fact alone');
    assert.equal(
      frames.at(-1),
      `1,501 facts, up to ${out
        .trimEnd()
        .split('\n')
        .map((l) => JSON.parse(l).observed_at as string)
        .at(-1)}`,
    );
  });

  it("the docs' NDJSON line has the members an exported line has", async () => {
    const doc = fs.readFileSync(path.join(ROOT, 'docs', 'cli.md'), 'utf8');
    const section = doc.slice(doc.indexOf('## Exporting facts'));
    const example = /^\{"id".*$/m.exec(section)?.[0];
    assert.ok(example, 'docs/cli.md shows an exported line');
    const r = ok(await cli(['facts', 'export', '--data-model', s.model.slug, '--format', 'ndjson']));
    const line = JSON.parse(r.stdout.split('\n')[0]!) as Record<string, unknown>;
    assert.deepEqual(Object.keys(JSON.parse(example) as object), Object.keys(line));
    assert.match(section, /^exported: 2 facts to open-orders\.csv$/m);
  });

  it('a reader that stops early (| head) ends the export quietly', async () => {
    const r = await runProcess(
      '/bin/sh',
      ['-c', `"${process.execPath}" src/main.ts facts export --data-model ${s.model.slug} --mode timeline --format ndjson | head -n 3`],
      ROOT,
      { PATH: process.env.PATH, DATA_DIR: dataDir, TRIBUTARY_URL: t.url },
    );
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout.trimEnd().split('\n').length, 3);
    assert.equal(r.stderr, '');
  });
});

describe('memory', () => {
  it('does not grow with the number of facts: 20,000 facts of 3 KB (60 MB) export under a 48 MB heap', { timeout: 600_000 }, async () => {
    const model = await createModel(t.deps.db, tenant, [
      { name: 'k', type: 'string', is_primary_key: true },
      { name: 'pad', type: 'string' },
    ]);
    const pad = 'x'.repeat(3000);
    const start = Date.parse('2025-01-01T00:00:00Z');
    const items = Array.from({ length: 20_000 }, (_, i) => ({ observed_at: new Date(start + i * 60_000).toISOString(), data: { k: `k${i}`, pad } }));
    await seed(items, model);
    // The peak resident set, sampled while the command runs, for the record: not asserted, as
    // V8 lets the heap grow lazily with the garbage a longer run makes (heapTotal 40 -> 100 MB
    // here while heapUsed stays near 20 MB); the heap limit below is what a held export breaks.
    const preload = path.join(dir, 'rss.mjs');
    fs.writeFileSync(
      preload,
      [
        'let peak = 0;',
        'const sample = () => (peak = Math.max(peak, process.memoryUsage.rss()));',
        'setInterval(sample, 5).unref();',
        "process.on('exit', () => (sample(), process.stderr.write(`peak ${peak}\\n`)));",
        '',
      ].join('\n'),
    );
    const run = async (n: number) => {
      const out = path.join(dir, `big-${n}.ndjson`);
      const until = new Date(start + n * 60_000).toISOString();
      const args = ['--max-old-space-size=48', '--import', preload, 'src/main.ts', 'facts', 'export', '--data-model', model.slug];
      const env = { PATH: process.env.PATH, DATA_DIR: dataDir, TRIBUTARY_URL: t.url };
      const r = ok(await runProcess(process.execPath, [...args, '--mode', 'timeline', '--format', 'ndjson', '--until', until, '--output', out], ROOT, env, ''));
      const lines = fs.readFileSync(out, 'utf8').trimEnd().split('\n').length;
      fs.rmSync(out);
      return { lines, mib: Number(/peak (\d+)/.exec(r.stderr)?.[1]) / 2 ** 20 };
    };
    const small = await run(2000);
    const big = await run(20_000);
    assert.deepEqual([small.lines, big.lines], [2000, 20_000]);
    console.log(`peak RSS under a 48 MB heap: ${small.mib.toFixed(0)} MiB for 2,000 facts, ${big.mib.toFixed(0)} MiB for 20,000 (60 MB of NDJSON)`);
  });
});
