/**
 * `npm run bench:expressions`: the cost of evaluating a step's expressions in the
 * expression pool (child processes) beside evaluating them in this process, as the worker
 * did before the pool. A step here is the bench workflow's transform over a small payload,
 * and a write_fact mapping of three fields. Prints a Markdown table: this thread's CPU per
 * step (what the worker's event loop pays), the latency of one step alone, and steps/s
 * with 64 steps in flight (as WORKER_CONCURRENCY keeps).
 * Settings: BENCH_EXPRESSION_STEPS (per cell, default 20000), EXPRESSION_PROCESSES (default 2).
 */
import os from 'node:os';
import jsonata from 'jsonata';
import { createExpressionPool, type ExpressionJob } from '../src/expressions/expression-pool.ts';
import { intEnv } from './common.ts';

const STEPS = intEnv('BENCH_EXPRESSION_STEPS', 20_000, 100, 10_000_000);
const PROCESSES = intEnv('EXPRESSION_PROCESSES', 2, 1, 64);
const IN_FLIGHT = 64;

const ctx = {
  payload: {
    order: {
      id: 'o-1',
      total: 42.5,
      lines: [
        { sku: 'a', qty: 1 },
        { sku: 'b', qty: 2 },
      ],
    },
  },
  steps: {},
  run: { id: 'r', attempt: 1 },
  trigger: { key: 'hook' },
};
const jobs: Record<string, ExpressionJob> = {
  'transform (1 expression)': { workspace: 'bench', input: ctx, expressions: ['{"order_id": payload.order.id, "amount": payload.order.total}'] },
  'write_fact mapping (3 expressions)': {
    workspace: 'bench',
    input: ctx,
    expressions: ['payload.order.id', 'payload.order.total', '$count(payload.order.lines)'],
  },
};

const pool = createExpressionPool({ processes: PROCESSES, memoryMb: 128, timeoutMs: 1000 });

async function inProcess(job: ExpressionJob): Promise<unknown[][]> {
  const out: unknown[] = [];
  for (const e of job.expressions) out.push(JSON.parse(JSON.stringify((await compiled(e).evaluate(job.input)) ?? null)));
  return [out];
}
const cache = new Map<string, ReturnType<typeof jsonata>>();
const compiled = (e: string) => cache.get(e) ?? cache.set(e, jsonata(e)).get(e)!;

async function cell(run: (job: ExpressionJob) => Promise<unknown[][]>, job: ExpressionJob) {
  for (let i = 0; i < 2000; i++) await run(job);
  // One at a time: latency.
  let t = performance.now();
  const serial = Math.min(2000, STEPS);
  for (let i = 0; i < serial; i++) await run(job);
  const latencyUs = ((performance.now() - t) * 1000) / serial;
  // 64 in flight: throughput and this thread's CPU per step.
  const cpu = process.threadCpuUsage();
  t = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (next++ < STEPS) await run(job);
    }),
  );
  const seconds = (performance.now() - t) / 1000;
  const used = process.threadCpuUsage(cpu);
  return { cpuUs: (used.user + used.system) / STEPS, latencyUs, perS: STEPS / seconds };
}

console.log(
  `Expression steps, ${new Date().toISOString()}, Node ${process.version}, ${os.cpus().length} x ${os.cpus()[0]?.model ?? '?'}, ${STEPS} steps per cell, pool of ${PROCESSES} processes, load before ${os
    .loadavg()
    .map((n) => n.toFixed(2))
    .join(' / ')}\n`,
);
console.log("| Step | Where | This thread's CPU per step | Latency of one step | Steps/s, 64 in flight |");
console.log('|---|---|---:|---:|---:|');
for (const [name, job] of Object.entries(jobs)) {
  for (const [where, run] of [
    ['in this process (before)', inProcess],
    ['expression pool (now)', (j: ExpressionJob) => pool.run(j)],
  ] as const) {
    const r = await cell(run, job);
    console.log(`| ${name} | ${where} | ${r.cpuUs.toFixed(1)} µs | ${r.latencyUs.toFixed(1)} µs | ${Math.round(r.perS).toLocaleString('en-US')} |`);
  }
}
await pool.close();
