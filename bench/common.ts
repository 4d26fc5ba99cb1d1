/** What both benchmark scripts share: settings from the environment, scratch databases, machine facts. */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import { freshPostgres, type ScratchPostgres } from '../test/helpers/databases.ts';

export { freePort } from '../test/helpers/cli.ts';

export function intEnv(name: string, def: number, min: number, max: number): number {
  const v = process.env[name];
  if (v === undefined || v.trim() === '') return def;
  const n = Number(v);
  if (!Number.isInteger(n) || n < min || n > max) throw new Error(`${name} must be a whole number between ${min} and ${max}`);
  return n;
}

export function redact(u: string): string {
  try {
    const url = new URL(u);
    if (url.password) url.password = '***';
    return url.toString();
  } catch {
    return '(unparsable URL)';
  }
}

/** A migrated scratch database `<prefix>_<random>` on the server of `baseUrl`, or why not. */
async function scratchPostgres(baseUrl: string, prefix: string): Promise<ScratchPostgres | { skip: string }> {
  try {
    return await freshPostgres(baseUrl, prefix);
  } catch (err) {
    return { skip: `no scratch database on PostgreSQL at ${redact(baseUrl)}: ${(err as Error).message}` };
  }
}

export const DEFAULT_PG = 'postgres://postgres@127.0.0.1:5432/postgres';

/**
 * The database of one engine's run: on PostgreSQL a scratch database `<prefix>_<random>` on
 * the server of BENCH_DATABASE_URL / DATABASE_URL / DEFAULT_PG, its URL put into
 * `vars.DATABASE_URL`, with the server version and a drop for the end; on PGlite nothing to
 * create. `skip` says why PostgreSQL cannot be used.
 */
export async function engineDatabase(
  engine: 'pglite' | 'postgres',
  prefix: string,
  vars: Record<string, string>,
): Promise<{ version: string | undefined; drop: () => Promise<void> } | { skip: string }> {
  if (engine === 'pglite') return { version: undefined, drop: async () => {} };
  const fresh = await scratchPostgres(process.env.BENCH_DATABASE_URL || process.env.DATABASE_URL || DEFAULT_PG, prefix);
  if ('skip' in fresh) return fresh;
  vars.DATABASE_URL = fresh.url;
  return { version: fresh.version, drop: fresh.drop };
}

export function sh(cmd: string, args: string[]): string {
  try {
    return execFileSync(cmd, args, { encoding: 'utf8', timeout: 5000 }).trimEnd();
  } catch {
    return '(unavailable)';
  }
}

export function machine() {
  let cpu = '(unknown)';
  try {
    cpu = /^model name\s*:\s*(.+)$/m.exec(fs.readFileSync('/proc/cpuinfo', 'utf8'))?.[1]?.trim() ?? cpu;
  } catch {
    // not Linux
  }
  return { nproc: sh('nproc', []), free: sh('free', ['-h']), node: process.version, cpu, os: `${os.type()} ${os.release()} ${os.arch()}` };
}

/**
 * Settings for an app under benchmark: silent logs, no worker, and rate windows (per
 * account, per client address) that still run but can never reject.
 */
export function benchEnv(dataDir: string): Record<string, string> {
  return {
    DATA_DIR: dataDir,
    TRIBUTARY_ADMIN_TOKEN: `tbadm_${randomBytes(32).toString('base64url')}`,
    LOG_LEVEL: 'silent',
    PORT: '0',
    RATE_LIMIT_MAX: '1000000',
    RATE_LIMIT_WINDOW_SECONDS: '1',
    TOKEN_RATE_LIMIT_MAX: '1000000000',
    TOKEN_RATE_LIMIT_WINDOW_SECONDS: '1',
    WORKER: 'false',
  };
}

export const ENGINES = (process.env.BENCH_ENGINES ?? 'pglite,postgres').split(',').map((x) => x.trim());

/**
 * The driver of both bench scripts: each engine of BENCH_ENGINES in turn, its notes
 * printed, then the report written (unless BENCH_NO_WRITE=1) with the start time and the
 * load average before the run; exits 0, or 1 with the error.
 */
export function runBench<R extends { notes: string[] }>(
  benchEngine: (engine: 'pglite' | 'postgres') => Promise<R>,
  write: (reports: R[], started: Date, loadBefore: string) => void,
): void {
  const main = async () => {
    const started = new Date();
    const loadBefore = os.loadavg().map((n) => n.toFixed(2)).join(' / ');
    const reports: R[] = [];
    for (const engine of ['pglite', 'postgres'] as const) {
      if (!ENGINES.includes(engine)) continue;
      const report = await benchEngine(engine);
      for (const n of report.notes) console.log(`  ${n}`);
      reports.push(report);
    }
    if (process.env.BENCH_NO_WRITE !== '1') write(reports, started, loadBefore);
  };
  main().then(
    () => process.exit(0),
    (err) => {
      console.error(err);
      process.exit(1);
    },
  );
}

const CLK_TCK = Number(sh('getconf', ['CLK_TCK'])) || 100;

/** Busy (non-idle, non-iowait) CPU time of the whole machine so far, from /proc/stat. */
export function machineBusyMicros(): number | undefined {
  try {
    const line = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0]!;
    const [user, nice, system, _idle, _iowait, irq, softirq, steal] = line.trim().split(/\s+/).slice(1).map(Number);
    return ((user! + nice! + system! + irq! + softirq! + steal!) * 1e6) / CLK_TCK;
  } catch {
    return undefined;
  }
}

/** CPU time (user + system) of a process so far, from /proc. */
export function procCpuMicros(pid: number): number | undefined {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(f[11]) + Number(f[12])) * 1e6) / CLK_TCK;
  } catch {
    return undefined;
  }
}

/** Waits until a child `serve` is ready: /readyz 200 (or it exits). */
export async function waitHealthy(url: string, child: ChildProcess): Promise<void> {
  for (let i = 0; i < 600; i++) {
    if (child.exitCode !== null) throw new Error(`serve exited with ${child.exitCode}`);
    try {
      if ((await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(1000) })).ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('serve was not ready (/readyz) within 60 s');
}
