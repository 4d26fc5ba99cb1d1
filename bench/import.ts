/**
 * Fact import benchmark: `tributary facts import` of a large NDJSON file, as a user runs it.
 *
 *   node bench/import.ts
 *
 * For each engine: `tributary serve` started as a child process on a fresh database
 * (PostgreSQL: a scratch `tributary_bench_import_<random>`, dropped at the end; PGlite: a
 * fresh data directory on disk), one data model created through the JSON:API with the
 * bootstrap credentials, an NDJSON file written to disk line by line, then the CLI run as a
 * child process. Reported: lines per second, and the peak resident memory of the server
 * during the import (VmHWM, reset when the import starts) and of the CLI (VmRSS sampled
 * every 20 ms), beside the server's resident memory before the import. Memory that does not grow with the file is what "streaming"
 * has to show. Both processes run with a V8 heap limit (old space) below the file's size,
 * so holding the file as strings or objects would fail the run; Buffers live outside that
 * heap, which is what the resident-memory figures are for.
 *
 * While the import runs, other requests are sent at a steady rate whether or not the last
 * one has been answered (so a server that stops answering shows as the whole wait, not as
 * one slow sample): GET /healthz every 50 ms and an authenticated read (GET
 * /api/json/v1/data_models/{id} with a bearer token) every 100 ms, each timed from send to
 * the end of its body; p50/p99/max are reported against the targets (/healthz p99 <= 100 ms,
 * the read p99 <= 250 ms).
 *
 * Settings (environment): BENCH_DATABASE_URL or DATABASE_URL, BENCH_ENGINES (default
 * "pglite,postgres"), BENCH_IMPORT_PG_LINES (default 1,000,000), BENCH_IMPORT_PGLITE_LINES
 * (default 1,000,000), BENCH_NO_WRITE=1 (print only).
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import {
  benchEnv,
  exchangeToken,
  freePort,
  intEnv,
  machineLine,
  postJsonApi as api,
  procKiB,
  ROOT,
  runBench,
  runHeading,
  stopChild,
  waitHealthy,
  watchdog,
  withEngine,
  writeDoc,
  type Engine,
} from './common.ts';
const DOC = path.join(ROOT, 'docs', 'benchmarks-import.md');
const MAIN = path.join(ROOT, 'src', 'main.ts');
const LINES = {
  postgres: intEnv('BENCH_IMPORT_PG_LINES', 1_000_000, 1000, 50_000_000),
  pglite: intEnv('BENCH_IMPORT_PGLITE_LINES', 1_000_000, 1000, 10_000_000),
};
const DAY_MS = 86_400_000;
/** V8 heap limits below the file's size: holding the file as strings or objects would fail. */
const SERVER_HEAP_MB = 96;
const CLI_HEAP_MB = 48;

watchdog('bench/import', 40 * 60_000);

/** Resets VmHWM to the current RSS (Linux: "5" to clear_refs); false where that is refused. */
function resetPeak(pid: number): boolean {
  try {
    fs.writeFileSync(`/proc/${pid}/clear_refs`, '5');
    return true;
  } catch {
    return false;
  }
}

const mib = (kib: number | undefined) => (kib === undefined ? 'n/a' : `${(kib / 1024).toFixed(0)} MiB`);

/** Latencies of one kind of request sent while the import runs. */
interface Probe {
  name: string;
  target: number;
  ms: number[];
  failed: number;
}

const TARGETS = { healthz: 100, read: 250 };

/**
 * Sends `send` every `periodMs` until stopped, without waiting for the previous answer, and
 * records each one's time from send to end of body. stop() waits for those in flight.
 */
function probeEvery(name: string, target: number, periodMs: number, send: () => Promise<Response>): { probe: Probe; stop: () => Promise<Probe> } {
  const probe: Probe = { name, target, ms: [], failed: 0 };
  const inFlight = new Set<Promise<void>>();
  const fire = () => {
    const t0 = performance.now();
    const p = send()
      .then(async (res) => {
        await res.arrayBuffer();
        if (res.ok) probe.ms.push(performance.now() - t0);
        else probe.failed++;
      })
      .catch(() => {
        probe.failed++;
      })
      .finally(() => inFlight.delete(p));
    inFlight.add(p);
  };
  const timer = setInterval(fire, periodMs);
  return {
    probe,
    stop: async () => {
      clearInterval(timer);
      await Promise.all(inFlight);
      return probe;
    },
  };
}

function quantile(sorted: number[], q: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;
}

interface ProbeSummary {
  name: string;
  target: number;
  n: number;
  failed: number;
  p50: number;
  p99: number;
  max: number;
}

function summarize(p: Probe): ProbeSummary {
  const sorted = [...p.ms].sort((a, b) => a - b);
  return {
    name: p.name,
    target: p.target,
    n: sorted.length,
    failed: p.failed,
    p50: quantile(sorted, 0.5),
    p99: quantile(sorted, 0.99),
    max: sorted.at(-1) ?? NaN,
  };
}

const showProbe = (s: ProbeSummary) =>
  `${s.name}: ${s.n} answered${s.failed ? `, ${s.failed} failed` : ''}, p50 ${s.p50.toFixed(0)} ms, p99 ${s.p99.toFixed(0)} ms (target <= ${s.target} ms: ${s.p99 <= s.target && s.failed === 0 ? 'met' : 'NOT met'}), max ${s.max.toFixed(0)} ms`;

/** N lines over N/10 entities, observed over the last year, written as a stream. */
async function writeNdjson(file: string, lines: number): Promise<number> {
  const out = fs.createWriteStream(file);
  const end = Date.now();
  const statuses = ['open', 'paid', 'void', 'overdue'];
  for (let n = 0; n < lines; n++) {
    const h = (n * 2654435761) % 4294967296;
    const line = JSON.stringify({
      observed_at: new Date(end - (h % (365 * DAY_MS))).toISOString(),
      data: {
        invoice_id: `inv-${String(n % Math.max(1, Math.floor(lines / 10))).padStart(7, '0')}`,
        status: statuses[h % 4],
        customer: `c-${h % 5000}`,
        amount: h % 10000,
      },
    });
    if (!out.write(`${line}\n`)) await new Promise<void>((r) => out.once('drain', () => r()));
  }
  await new Promise<void>((resolve, reject) => out.end((err?: Error | null) => (err ? reject(err) : resolve())));
  return fs.statSync(file).size;
}

interface Report {
  engine: 'pglite' | 'postgres';
  detail: string;
  lines: number;
  fileBytes: number;
  seconds: number;
  written: number;
  serverBefore: number | undefined;
  serverPeak: number | undefined;
  cliPeak: number | undefined;
  probes: ProbeSummary[];
  notes: string[];
}

function benchEngine(engine: Engine): Promise<Report> {
  const lines = LINES[engine];
  const skipped = (note: string): Report => ({
    engine,
    detail: 'PostgreSQL',
    lines,
    fileBytes: 0,
    seconds: 0,
    written: 0,
    serverBefore: undefined,
    serverPeak: undefined,
    cliPeak: undefined,
    probes: [],
    notes: [note],
  });
  const options = { prefix: 'tributary_bench_import', vars: (dir: string) => benchEnv(path.join(dir, 'data')), skipped };
  return withEngine(engine, options, async ({ dir, vars, version, defer }) => {
    const detail = engine === 'postgres' ? `PostgreSQL ${version} on loopback` : 'PGlite (embedded, data directory on disk)';
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    // Per-process rate windows: the shared ones would need Redis, which the import does not touch.
    const env: NodeJS.ProcessEnv = { ...process.env, ...vars, PORT: String(port), HOST: '127.0.0.1' };
    delete env.REDIS_URL;
    const serve = spawn(process.execPath, [`--max-old-space-size=${SERVER_HEAP_MB}`, MAIN, 'serve'], { env, stdio: ['ignore', 'ignore', 'inherit'] });
    defer('tributary serve', () => stopChild(serve));
    await waitHealthy(url, serve);
    const boot = JSON.parse(fs.readFileSync(path.join(vars.DATA_DIR!, 'bootstrap.json'), 'utf8')) as {
      client_id: string;
      client_secret: string;
      workspace_id: string;
    };
    const token = await exchangeToken(url, boot.client_id, boot.client_secret);
    const slug = `invoices-${randomBytes(3).toString('hex')}`;
    const model = await api(url, token, '/data_models', { data: { type: 'data_model', attributes: { name: 'Invoices', slug } } });
    const fields: [string, string, boolean][] = [
      ['invoice_id', 'string', true],
      ['status', 'string', false],
      ['customer', 'string', false],
      ['amount', 'integer', false],
    ];
    for (const [name, type, pk] of fields) {
      await api(url, token, '/data_model_fields', {
        data: { type: 'data_model_field', attributes: { data_model_id: model.data.id, name, type, is_primary_key: pk, is_required: pk } },
      });
    }

    const file = path.join(dir, 'facts.ndjson');
    const fileBytes = await writeNdjson(file, lines);
    console.log(`\n${detail}: importing ${lines.toLocaleString('en-US')} lines (${(fileBytes / 1048576).toFixed(0)} MiB)`);
    const serverBefore = procKiB(serve.pid!, 'VmRSS');
    // The peak so far is the start's (PGlite's initdb spikes); from here on it is the import's.
    const peakReset = resetPeak(serve.pid!);

    const auth = { authorization: `Bearer ${token}`, accept: 'application/vnd.api+json' };
    const probes = [
      probeEvery('GET /healthz', TARGETS.healthz, 50, () => fetch(`${url}/healthz`)),
      probeEvery(`GET /api/json/v1/data_models/{id}`, TARGETS.read, 100, () => fetch(`${url}/api/json/v1/data_models/${model.data.id}`, { headers: auth })),
    ];
    const t0 = performance.now();
    const cli = spawn(
      process.execPath,
      [`--max-old-space-size=${CLI_HEAP_MB}`, MAIN, 'facts', 'import', '--workspace', boot.workspace_id, '--data-model', slug, file, '--json'],
      {
        env: { ...env, TRIBUTARY_URL: url },
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    let cliPeak = 0;
    const sampler = setInterval(() => {
      cliPeak = Math.max(cliPeak, procKiB(cli.pid!, 'VmRSS') ?? 0);
    }, 20);
    let stdout = '';
    cli.stdout!.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
    const code = await new Promise<number | null>((resolve) => cli.once('exit', resolve));
    clearInterval(sampler);
    const seconds = (performance.now() - t0) / 1000;
    const probed = (await Promise.all(probes.map((p) => p.stop()))).map(summarize);
    if (code !== 0) throw new Error(`facts import exited with ${code}: ${stdout}`);
    // --json prints the import summary itself: {lines, written, duplicates, rejected, errors, ...}.
    const summary = JSON.parse(stdout) as { written: number; rejected: number };
    if (summary.written !== lines || summary.rejected !== 0) throw new Error(`import answered ${stdout.slice(0, 500)}`);
    const serverPeak = procKiB(serve.pid!, 'VmHWM');
    const rate = lines / seconds;
    console.log(
      `  ${seconds.toFixed(1)} s, ${rate.toFixed(0)} lines/s; server RSS before ${mib(serverBefore)}, peak ${mib(serverPeak)}; CLI peak ${mib(cliPeak)}`,
    );
    for (const p of probed) console.log(`  during the import, ${showProbe(p)}`);
    const notes = [
      ...(peakReset ? [] : ['The server peak could not be reset before the import: it includes the start.']),
      `${engine}: ${lines.toLocaleString('en-US')} lines (${(fileBytes / 1048576).toFixed(0)} MiB) in ${seconds.toFixed(1)} s = ${rate.toFixed(0)} lines/s; server resident memory ${mib(serverBefore)} before, peak ${mib(serverPeak)}; CLI peak ${mib(cliPeak)}.`,
    ];
    return { engine, detail, lines, fileBytes, seconds, written: summary.written, serverBefore, serverPeak, cliPeak, probes: probed, notes };
  });
}

function writeReport(reports: Report[], started: Date, loadBefore: string): void {
  const rows = reports
    .filter((r) => r.seconds > 0)
    .map(
      (r) =>
        `| ${r.detail} | ${r.lines.toLocaleString('en-US')} | ${(r.fileBytes / 1048576).toFixed(0)} MiB | ${r.seconds.toFixed(1)} s | ${(r.lines / r.seconds).toFixed(0)} | ${mib(r.serverBefore)} | ${mib(r.serverPeak)} | ${mib(r.cliPeak)} |`,
    );
  const probeRows = reports.flatMap((r) =>
    r.probes.map(
      (p) =>
        `| ${r.engine} | ${p.name} | ${p.n} | ${p.failed} | ${p.p50.toFixed(0)} ms | ${p.p99.toFixed(0)} ms | ${p.max.toFixed(0)} ms | <= ${p.target} ms: ${p.p99 <= p.target && p.failed === 0 ? 'met' : '**not met**'} |`,
    ),
  );
  const text = `# Fact import benchmark

\`node bench/import.ts\` (see its header for the settings): \`tributary serve\` as a child process
on a fresh database, one data model (a string primary key over N/10 entities, two more
strings, an integer), an NDJSON file written to disk, then \`tributary facts import ... --json\`
as a child process, the way a user runs it, the server with a V8 old-space limit of
${SERVER_HEAP_MB} MiB and the CLI with ${CLI_HEAP_MB} MiB, below the file's size (holding the file as
strings or objects would fail; Buffers live outside that heap, hence the resident-memory
columns). Every line is valid; each is a new fact, so
every batch of 1,000 also moves fact_current for its entities. Peak memory: the server's
VmHWM, reset when the import starts (so the start's own peak is not counted), the CLI's
VmRSS sampled every 20 ms.

${runHeading(2, started)}

${machineLine()} Load average (1/5/15 min) before the run: ${loadBefore}.

| Engine | Lines | File | Time | Lines/s | Server RSS before | Server peak | CLI peak |
|---|---:|---:|---:|---:|---:|---:|---:|
${rows.join('\n')}

Other requests during the import, sent at a steady rate whatever the previous one's fate
(GET /healthz every 50 ms, an authenticated GET of the data model every 100 ms), timed from
send to the end of the body:

| Engine | Request | Answered | Failed | p50 | p99 | Max | p99 target |
|---|---|---:|---:|---:|---:|---:|---|
${probeRows.join('\n')}

${reports.flatMap((r) => r.notes.filter((n) => !n.startsWith(`${r.engine}:`)).map((n) => `- ${r.engine}: ${n}`)).join('\n')}
`;
  writeDoc(DOC, text);
}

runBench(benchEngine, writeReport);
