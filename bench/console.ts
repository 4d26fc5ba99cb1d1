/**
 * `npm run bench:console`: how fast the console shows runs, timed in Debian's Chromium with
 * Playwright. One process holds the app (worker off: a queued run is what a new delivery
 * shows first) and drives the browser. A workspace with BENCH_CONSOLE_RUNS finished runs
 * (default 10,000, each with three recorded steps) and a webhook workflow.
 *
 * - Runs page: from setting `#/runs` (coming from another page) to its first row shown;
 *   target <= 300 ms.
 * - Run page: from setting `#/runs/ID` to its steps shown; target <= 300 ms.
 * - A new run: from a delivery's 202 to its row in the open runs page; target <= 1 s.
 *
 * Settings: BENCH_CONSOLE_RUNS, BENCH_CONSOLE_SAMPLES (20 of each), BENCH_ENGINES, BENCH_NO_WRITE=1.
 */
import path from 'node:path';
import { sql } from 'kysely';
import type { Page } from 'playwright-core';
import { uuidv7 } from '../src/ids.ts';
import { CHROMIUM, launchChromium } from '../test/helpers/chromium.ts';
import {
  benchEnv,
  exchangeToken,
  fmt,
  inProcessDetail,
  intEnv,
  loadAverage,
  machineLine,
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
} from './common.ts';

const DOC = path.join(ROOT, 'docs', 'benchmarks.md');
const TITLE = '## Console (`node bench/console.ts`)';
const RUNS = intEnv('BENCH_CONSOLE_RUNS', 10_000, 100, 1_000_000);
const SAMPLES = intEnv('BENCH_CONSOLE_SAMPLES', 20, 3, 1000);
const TARGET_PAGE_MS = 300;
const TARGET_NEW_RUN_MS = 1000;

/** What each measurement waits for: the page's own marks (see console/src/pages/runs.tsx, run.tsx). */
const RUN_ROW = 'table tbody tr a[href^="#/runs/"]';
const runLink = (id: string) => `a[href="#/runs/${id}"]`;
const STEPS_SHOWN = '[data-testid="run-steps"]';

interface Timing {
  p50: number;
  p95: number;
  max: number;
}

interface EngineReport {
  engine: Engine;
  detail: string;
  list?: Timing;
  run?: Timing;
  fresh?: Timing;
  notes: string[];
}

function timing(samples: number[]): Timing {
  const s = [...samples].sort((a, b) => a - b);
  const at = (q: number) => s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
  return { p50: at(0.5), p95: at(0.95), max: s[s.length - 1]! };
}

const STEPS = JSON.stringify(
  ['shape', 'check', 'store'].map((key, i) => ({
    key,
    status: 'succeeded',
    started_at: new Date(Date.UTC(2026, 10, 1, 0, 0, 0, i * 10)).toISOString(),
    finished_at: new Date(Date.UTC(2026, 10, 1, 0, 0, 0, i * 10 + 7)).toISOString(),
    output: { order: { id: 'o-1', total: 12.5 }, step: key },
    error: null,
  })),
);

/** RUNS finished runs of the workflow, spread over the last day, in batches of 2,000. */
async function seedRuns(deps: Awaited<ReturnType<typeof runApp>>['deps'], s: { org: string; ws: string; workflow: string }): Promise<string> {
  const now = Date.now();
  let last = '';
  for (let from = 0; from < RUNS; from += 2000) {
    const count = Math.min(2000, RUNS - from);
    const ids = Array.from({ length: count }, () => uuidv7());
    const times = ids.map((_, i) => new Date(now - 86_400_000 + ((from + i) * 86_400_000) / RUNS));
    await sql`insert into workflow_runs (id, organization_id, workspace_id, workflow_id, workflow_version, trigger_key, delivery_id, payload, status, attempt, steps, outcome, facts_written, run_at, started_at, finished_at, inserted_at, updated_at)
      select u.id, ${s.org}, ${s.ws}, ${s.workflow}, 1, 'hook', 'd-' || u.id, '{"order":{"id":"o-1","total":12.5}}'::jsonb, 'succeeded', 1, ${STEPS}::jsonb, 'completed', 1, u.at, u.at, u.at, u.at, u.at
      from unnest(${ids}::uuid[], ${times}::timestamptz[]) as u(id, at)`.execute(deps.db);
    last = ids[ids.length - 1]!;
  }
  await sql`analyze workflow_runs`.execute(deps.db);
  return last;
}

/** Time from setting the hash to `selector` visible, in the browser's own clock. */
async function navigateTimed(page: Page, hash: string, selector: string): Promise<number> {
  return page.evaluate(
    ([h, sel]) =>
      new Promise<number>((resolve, reject) => {
        // This runs in the page: its globals are the browser's.
        const { document, location, requestAnimationFrame } = globalThis as any;
        const t0 = performance.now();
        const deadline = t0 + 10_000;
        const check = () => {
          if (document.querySelector(sel!)) resolve(performance.now() - t0);
          else if (performance.now() > deadline) reject(new Error(`${sel} did not show after ${h}`));
          else requestAnimationFrame(check);
        };
        location.hash = h!;
        requestAnimationFrame(check);
      }),
    [hash, selector] as const,
  );
}

async function benchEngine(engine: Engine): Promise<EngineReport> {
  const skipped = (note: string): EngineReport => ({ engine, detail: '', notes: [note] });
  if (!CHROMIUM) return skipped('Skipped: no Chromium (apt-get install chromium).');
  return withEngine(engine, { prefix: 'tributary_bench_console', skipped, vars: (dir) => ({ ...benchEnv(dir), RATE_LIMIT_MAX: '1000000' }) }, async (run) => {
    const { deps, url } = await runApp(run);
    const { org, ws, cred } = await seedTenant(deps.db, ['api_read', 'api_write', 'webhooks']);
    const bearer = await exchangeToken(url, cred.client_id, cred.client_secret);
    const { workflowId, token } = await saveWebhookWorkflow(url, bearer, {
      name: 'Orders',
      organizationId: org.id,
      serviceAccountId: cred.id,
      steps: [
        { key: 'shape', type: 'transform', config: { expression: 'payload' } },
        { key: 'check', type: 'condition', config: { expression: 'true' } },
        { key: 'store', type: 'transform', config: { expression: 'steps.shape' } },
      ],
    });
    const t0 = Date.now();
    const lastRun = await seedRuns(deps, { org: org.id, ws: ws.id, workflow: workflowId });
    console.log(`  ${engine}: ${fmt(RUNS)} runs seeded in ${fmt((Date.now() - t0) / 1000, 1)} s`);

    const browser = await launchChromium();
    run.defer('chromium', () => browser.close());
    const page = await browser.newPage({ viewport: { width: 1280, height: 860 } });
    await page.goto(`${url}/console`);
    await page.getByLabel('Client id').fill(cred.client_id);
    await page.getByLabel('Client secret').fill(cred.client_secret);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByTestId('workspace-name').waitFor();

    const list: number[] = [];
    const one: number[] = [];
    for (let i = 0; i < SAMPLES + 2; i++) {
      await navigateTimed(page, '#/workflows', 'h1');
      const l = await navigateTimed(page, '#/runs', RUN_ROW);
      await navigateTimed(page, '#/workflows', 'h1');
      const r = await navigateTimed(page, `#/runs/${lastRun}`, STEPS_SHOWN);
      // The first two warm the browser's and the server's caches.
      if (i >= 2) {
        list.push(l);
        one.push(r);
      }
    }

    await navigateTimed(page, '#/runs', RUN_ROW);
    const fresh: number[] = [];
    for (let i = 0; i < SAMPLES; i++) {
      const res = await fetch(`${url}/api/v1/webhooks/${token}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json', 'idempotency-key': `bench-${i}-${Date.now()}` },
        body: JSON.stringify({ order: { id: `o-${i}`, total: i } }),
      });
      const answered = Date.now();
      if (res.status !== 202) throw new Error(`delivery answered ${res.status}: ${await res.text()}`);
      const { workflow_run_id: id } = (await res.json()) as { workflow_run_id: string };
      await page.locator(runLink(id)).waitFor({ timeout: 10_000 });
      fresh.push(Date.now() - answered);
    }
    await page.close();

    const report: EngineReport = {
      engine,
      detail: inProcessDetail(engine, run.version),
      list: timing(list),
      run: timing(one),
      fresh: timing(fresh),
      notes: [],
    };
    const verdict = (t: Timing, target: number) => `p95 ${fmt(t.p95)} ms (target <= ${target} ms): ${t.p95 <= target ? 'met' : '**missed**'}`;
    report.notes.push(
      `Runs page with ${fmt(RUNS)} runs: p50 ${fmt(report.list!.p50)} ms, ${verdict(report.list!, TARGET_PAGE_MS)}.`,
      `Run page: p50 ${fmt(report.run!.p50)} ms, ${verdict(report.run!, TARGET_PAGE_MS)}.`,
      `A new run in the open runs page after its 202: p50 ${fmt(report.fresh!.p50)} ms, max ${fmt(report.fresh!.max)} ms (target <= ${TARGET_NEW_RUN_MS} ms): ${report.fresh!.max <= TARGET_NEW_RUN_MS ? 'met' : '**missed**'}.`,
    );
    return report;
  });
}

const INTRO = `${TITLE}

\`npm run bench:console\` (see the header of bench/console.ts for the settings). One process
holds the app (worker off) and drives Debian's Chromium with Playwright, signed in to the
console as a service account of a workspace with ${fmt(RUNS)} finished runs. A page's time is
measured in the browser, from setting the address (\`#/runs\`, \`#/runs/ID\`, coming from
another page) to its first row or its steps on screen: the API calls, the JSON, and Preact's
render. A new run's time is from its delivery's 202 to its row in the open runs page (the
page polls every 750 ms). Targets: pages <= 300 ms, a new run <= 1 s.
`;

function runSection(reports: EngineReport[], started: Date, loadBefore: string): string {
  const out = [
    runHeading(3, started),
    '',
    `Command: \`npm run bench:console\` (${fmt(RUNS)} runs, ${SAMPLES} samples of each, after two warm-up rounds).`,
    '',
    `${machineLine()} Load average (1 / 5 / 15 min) before the run: ${loadBefore}.`,
    '',
  ];
  for (const r of reports) {
    out.push(`#### ${r.engine === 'pglite' ? 'PGlite' : 'PostgreSQL'}`, '');
    if (r.list && r.run && r.fresh) {
      out.push(
        `${r.detail}.`,
        '',
        '| Measure | p50 (ms) | p95 (ms) | max (ms) |',
        '|---|---:|---:|---:|',
        `| runs page, first row shown | ${fmt(r.list.p50)} | ${fmt(r.list.p95)} | ${fmt(r.list.max)} |`,
        `| run page, steps shown | ${fmt(r.run.p50)} | ${fmt(r.run.p95)} | ${fmt(r.run.max)} |`,
        `| new run shown after its 202 | ${fmt(r.fresh.p50)} | ${fmt(r.fresh.p95)} | ${fmt(r.fresh.max)} |`,
        '',
      );
    }
    out.push(...r.notes.map((n) => `- ${n}`), '');
  }
  return out.join('\n');
}

if (import.meta.main) {
  watchdog('bench/console', 15 * 60 * 1000);
  console.log(`bench/console: ${RUNS} runs, ${SAMPLES} samples; load average ${loadAverage()}`);
  runBench(benchEngine, (reports, started, loadBefore) => writeSection(DOC, TITLE, INTRO, runSection(reports, started, loadBefore), ['## Run ']));
}
