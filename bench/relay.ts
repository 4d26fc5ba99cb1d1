/**
 * `npm run bench:relay`: what the relay (src/relay/) costs a delivery. One process holds
 * the app (worker off), the relay in front of it (as `serve` runs it with RELAY_PORT) and
 * the load generator (autocannon in a worker thread). One tenant, an `api_key` inbound
 * connector and a workflow with a webhook trigger behind it.
 *
 * - Throughput: distinct deliveries posted directly (bearer token + key) and through the
 *   relay (key only), BENCH_CONNECTIONS connections, direct measured first and last; the
 *   relay's rate is compared with the mean of the two. Target: >= 80%.
 * - Added latency: BENCH_RELAY_SAMPLES deliveries one at a time, direct and relayed
 *   alternating, timed with the high-resolution clock; the relay's p99 minus the direct
 *   p99. Target: <= 2 ms.
 *
 * Settings: BENCH_DURATION (s per throughput scenario, default 10), BENCH_CONNECTIONS (50),
 * BENCH_RELAY_SAMPLES (2000 of each), BENCH_ENGINES, BENCH_NO_WRITE=1.
 */
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import autocannon from 'autocannon';
import pino from 'pino';
import { Pool } from 'undici';
import { createRelay } from '../src/relay/relay.ts';
import {
  benchEnv,
  exchangeToken,
  fmt,
  inProcessDetail,
  intEnv,
  loadAverage,
  machineLine,
  measure,
  pct,
  postgresCpuProbe,
  postJsonApi,
  ROOT,
  runApp,
  runBench,
  runHeading,
  saveWebhookWorkflow,
  seedTenant,
  watchdog,
  withEngine,
  writeSection,
  type Engine,
  type Measured,
} from './common.ts';

const DOC = path.join(ROOT, 'docs', 'benchmarks.md');
const TITLE = '## Relay (`node bench/relay.ts`)';
const DURATION = intEnv('BENCH_DURATION', 10, 1, 120);
const WARMUP = 2;
const CONNECTIONS = intEnv('BENCH_CONNECTIONS', 50, 1, 512);
const SAMPLES = intEnv('BENCH_RELAY_SAMPLES', 2000, 100, 100_000);
const TARGET_RATIO = 0.8;
const TARGET_ADDED_P99_MS = 2;

interface Latency {
  directP50: number;
  directP99: number;
  relayP50: number;
  relayP99: number;
}

interface EngineReport {
  engine: Engine;
  detail: string;
  rows: Array<Measured & { ratio?: number }>;
  ratio: number | undefined;
  latency: Latency | undefined;
  exchanges: number;
  notes: string[];
}

const body = (id: string) => JSON.stringify({ payload: { order: { id: `o-${id}`, total: 12.5, state: 'OPEN' } } });

function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

/** Deliveries one at a time, direct and relayed alternating; each timed from send to the whole answer. */
async function latency(direct: { url: string; headers: Record<string, string> }, relayed: { url: string; headers: Record<string, string> }): Promise<Latency> {
  const times = { direct: [] as number[], relay: [] as number[] };
  const pools = new Map<string, Pool>();
  const send = async (target: { url: string; headers: Record<string, string> }, id: string) => {
    const u = new URL(target.url);
    let pool = pools.get(u.origin);
    if (!pool) pools.set(u.origin, (pool = new Pool(u.origin, { connections: 1 })));
    const t0 = process.hrtime.bigint();
    const res = await pool.request({ method: 'POST', path: u.pathname, headers: { ...target.headers, 'idempotency-key': id }, body: body(id) });
    await res.body.arrayBuffer();
    if (res.statusCode !== 202) throw new Error(`latency: ${res.statusCode}`);
    return Number(process.hrtime.bigint() - t0) / 1e6;
  };
  const tag = randomBytes(4).toString('hex');
  for (let i = 0; i < 200; i++) {
    await send(direct, `warm-d-${tag}-${i}`);
    await send(relayed, `warm-r-${tag}-${i}`);
  }
  for (let i = 0; i < SAMPLES; i++) {
    times.direct.push(await send(direct, `lat-d-${tag}-${i}`));
    times.relay.push(await send(relayed, `lat-r-${tag}-${i}`));
  }
  for (const p of pools.values()) await p.close();
  const d = times.direct.sort((a, b) => a - b);
  const r = times.relay.sort((a, b) => a - b);
  return { directP50: quantile(d, 0.5), directP99: quantile(d, 0.99), relayP50: quantile(r, 0.5), relayP99: quantile(r, 0.99) };
}

async function benchEngine(engine: Engine): Promise<EngineReport> {
  const skipped = (note: string): EngineReport => ({ engine, detail: '', rows: [], ratio: undefined, latency: undefined, exchanges: 0, notes: [note] });
  return withEngine(
    engine,
    {
      prefix: 'tributary_bench_relay',
      skipped,
      vars: (dir) => ({
        ...benchEnv(dir),
        WEBHOOK_RATE_LIMIT_MAX: '1000000000',
        WEBHOOK_RATE_LIMIT_WINDOW_SECONDS: '1',
        MAX_CONNECTIONS_PER_ADDRESS: '0',
      }),
    },
    async (run) => {
      const { deps, url } = await runApp(run);
      const { org, cred } = await seedTenant(deps.db, ['api_read', 'api_write', 'webhooks']);
      const bearer = await exchangeToken(url, cred.client_id, cred.client_secret);
      const key = randomBytes(32).toString('base64url');
      const connector = await postJsonApi(url, bearer, '/external_connectors', {
        data: { type: 'external_connector', attributes: { name: 'provider', auth_type: 'api_key', direction: 'inbound', secret: key } },
      });
      const { token } = await saveWebhookWorkflow(url, bearer, {
        name: 'Relayed',
        organizationId: org.id,
        serviceAccountId: cred.id,
        inboundConnectorId: connector.data.id,
        steps: [{ key: 'note', type: 'transform', config: { expression: 'payload' } }],
      });
      const relay = await createRelay({
        config: deps.config,
        log: pino({ level: 'silent' }),
        targetUrl: url,
        credentials: () => ({ clientId: cred.client_id, clientSecret: cred.client_secret }),
      });
      run.defer('the relay', () => relay.stop());
      const relayUrl = await relay.listen(0, '127.0.0.1');

      type Target = { url: string; headers: Record<string, string> };
      const direct: Target = {
        url: `${url}/api/v1/webhooks/${token}`,
        headers: { authorization: `Bearer ${bearer}`, 'x-api-key': key, 'content-type': 'application/json' },
      };
      const relayed: Target = { url: `${relayUrl}/hooks/${token}`, headers: { 'x-api-key': key, 'content-type': 'application/json' } };
      const options = (target: Target, tag: string): autocannon.Options => ({
        url: target.url,
        method: 'POST',
        headers: { ...target.headers, 'idempotency-key': `${tag}-${randomBytes(4).toString('hex')}-[<id>]` },
        body: body('[<id>]'),
        idReplacement: true,
      });
      const probe = engine === 'postgres' ? postgresCpuProbe(deps.db) : undefined;
      const settings = { connections: CONNECTIONS, warmup: WARMUP, duration: DURATION, probe };
      const first = await measure('direct: POST /api/v1/webhooks/{token}, bearer + key (first)', options(direct, 'd1'), settings);
      const via = await measure('relay: POST /hooks/{token}, key only', options(relayed, 'r'), settings);
      const last = await measure('direct: POST /api/v1/webhooks/{token}, bearer + key (last)', options(direct, 'd2'), settings);
      const reference = (first.rps + last.rps) / 2;
      const ratio = reference > 0 ? via.rps / reference : undefined;
      const rows = [first, via, last].map((r) => ({ ...r, ratio: reference > 0 ? r.rps / reference : undefined }));
      const lat = await latency(direct, relayed);
      const added = lat.relayP99 - lat.directP99;
      console.log(
        `  latency, one at a time: direct p50 ${fmt(lat.directP50, 2)} p99 ${fmt(lat.directP99, 2)} ms; relay p50 ${fmt(lat.relayP50, 2)} p99 ${fmt(lat.relayP99, 2)} ms`,
      );
      const notes = [
        `Relay throughput: ${fmt(via.rps)}/s, ${pct(ratio)} of the direct rate (target >= ${pct(TARGET_RATIO)}): ${ratio !== undefined && ratio >= TARGET_RATIO ? 'met' : '**missed**'}.`,
        `p99 added by the relay, one delivery at a time: ${fmt(added, 2)} ms (target <= ${TARGET_ADDED_P99_MS} ms): ${added <= TARGET_ADDED_P99_MS ? 'met' : '**missed**'}; p50 added ${fmt(lat.relayP50 - lat.directP50, 2)} ms.`,
        `Token exchanges by the relay during the run: ${relay.tokens.exchanges}.`,
      ];
      for (const r of rows) if (r.non2xx || r.errors) notes.push(`${r.scenario}: ${r.non2xx} non-2xx, ${r.errors} errors/timeouts; its figure is not valid.`);
      return { engine, detail: inProcessDetail(engine, run.version), rows, ratio, latency: lat, exchanges: relay.tokens.exchanges, notes };
    },
  );
}

const INTRO = `${TITLE}

\`npm run bench:relay\` (see the header of bench/relay.ts for the settings). One process
holds the app (worker off), the relay in front of it and the load generator (autocannon in
a worker thread): one tenant, an \`api_key\` inbound connector and a workflow whose webhook
trigger sits behind it. Deliveries go directly (bearer token and key) or through the relay
(key only; the relay adds its bearer token and \`Tributary-Require-Verification\`), every
one with a distinct \`Idempotency-Key\`, so each makes a run. Throughput: direct measured
first and last, the relay compared with their mean (target >= 80%). Added latency:
deliveries one at a time, direct and relayed alternating, the relay's p99 minus the direct
p99 (target <= 2 ms). On this machine the relay shares the two cores with the app, the load
generator and PostgreSQL: every microsecond of its CPU is taken from the app.
`;

function runSection(reports: EngineReport[], started: Date, loadBefore: string): string {
  const out = [
    runHeading(3, started),
    '',
    `Command: \`npm run bench:relay\` (${DURATION} s per throughput scenario after a ${WARMUP} s warm-up, ${CONNECTIONS} connections; ${fmt(SAMPLES)} one-at-a-time deliveries of each kind).`,
    '',
    `${machineLine()} Load average (1 / 5 / 15 min) before the run: ${loadBefore}.`,
    '',
  ];
  for (const r of reports) {
    out.push(`#### ${r.engine === 'pglite' ? 'PGlite' : 'PostgreSQL'}`, '');
    if (r.rows.length > 0) {
      out.push(
        `${r.detail}.`,
        '',
        '| Scenario | req/s (mean) | p50 (ms) | p99 (ms) | Ratio to direct | Thread CPU per request (µs) | PostgreSQL CPU per request (µs) | Other load |',
        '|---|---:|---:|---:|---:|---:|---:|---:|',
      );
      for (const x of r.rows) {
        const bad = x.non2xx || x.errors ? ` (non-2xx ${x.non2xx}, errors ${x.errors})` : '';
        out.push(
          `| ${x.scenario}${bad} | ${fmt(x.rps)} | ${fmt(x.p50, 1)} | ${fmt(x.p99, 1)} | ${pct(x.ratio)} | ${fmt(x.cpuUs)} | ${fmt(x.dbCpuUs)} | ${pct(x.otherLoad)} |`,
        );
      }
      out.push('');
    }
    if (r.latency) {
      const l = r.latency;
      out.push(
        '| One at a time | p50 (ms) | p99 (ms) |',
        '|---|---:|---:|',
        `| direct | ${fmt(l.directP50, 2)} | ${fmt(l.directP99, 2)} |`,
        `| relay | ${fmt(l.relayP50, 2)} | ${fmt(l.relayP99, 2)} |`,
        `| added by the relay | ${fmt(l.relayP50 - l.directP50, 2)} | ${fmt(l.relayP99 - l.directP99, 2)} |`,
        '',
      );
    }
    out.push(...r.notes.map((n) => `- ${n}`), '');
  }
  return out.join('\n');
}

if (import.meta.main) {
  watchdog('bench/relay', (10 * 60 + DURATION * 8) * 1000);
  console.log(
    `bench/relay: ${DURATION} s per scenario (+${WARMUP} s warm-up), ${CONNECTIONS} connections, ${SAMPLES} one-at-a-time samples; load average ${loadAverage()}`,
  );
  runBench(benchEngine, (reports, started, loadBefore) => writeSection(DOC, TITLE, INTRO, runSection(reports, started, loadBefore), ['## Run ']));
}
