/**
 * Slow senders against a real `tributary serve` process with a small file-handle limit:
 * SLOW sockets (from 127.0.0.2) each send a token request with Content-Length: 10000 and
 * then one byte every EVERY_MS, while a well-behaved client (from 127.0.0.1) asks for
 * /healthz on a new connection every 200 ms. Prints how many of its requests were
 * answered and how long the server kept the slow sockets.
 *
 *   DATABASE_URL=postgres://... node bench/slow-clients.ts [server root]
 *   settings: SLOW (2000), EVERY_MS (10000), DURATION_MS (60000), NOFILE (1024), and the
 *   server's own (REQUEST_TIMEOUT_MS, HEADERS_TIMEOUT_MS, MAX_CONNECTIONS_PER_ADDRESS) passed through.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { benchEnv, freePort } from './common.ts';
import { freshPostgresDatabase } from '../test/helpers/app.ts';

const root = path.resolve(process.argv[2] ?? path.join(import.meta.dirname, '..'));
const SLOW = Number(process.env.SLOW ?? 2000);
const EVERY_MS = Number(process.env.EVERY_MS ?? 10_000);
const DURATION_MS = Number(process.env.DURATION_MS ?? 60_000);
const NOFILE = Number(process.env.NOFILE ?? 1024);

const port = await freePort();
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tributary-slow-'));
const env: NodeJS.ProcessEnv = { ...process.env, ...benchEnv(dataDir), PORT: String(port) };
let drop: (() => Promise<void>) | undefined;
if (process.env.DATABASE_URL) {
  const fresh = await freshPostgresDatabase();
  env.DATABASE_URL = fresh.url;
  drop = fresh.drop;
}
const server = spawn('prlimit', [`--nofile=${NOFILE}:${NOFILE}`, path.join(root, 'node_modules/.bin/node'), 'src/main.ts', 'serve', '--no-worker'], {
  cwd: root,
  env,
  stdio: 'ignore',
});

function probe(): Promise<{ ok: boolean; ms: number }> {
  const started = performance.now();
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/healthz', agent: false, timeout: 5_000 }, (res) => {
      res.resume();
      res.on('end', () => resolve({ ok: res.statusCode === 200, ms: performance.now() - started }));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', () => resolve({ ok: false, ms: performance.now() - started }));
  });
}

for (;;) {
  if ((await probe()).ok) break;
  await sleep(200);
}

const lifetimes: number[] = [];
let open = 0;
let refused = 0;
const sockets: net.Socket[] = [];
const head = `POST /api/v1/oauth/token HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 10000\r\n\r\ng`;
for (let i = 0; i < SLOW; i++) {
  const s = net.connect({ host: '127.0.0.1', port, localAddress: '127.0.0.2' });
  const opened = performance.now();
  s.on('error', () => undefined);
  s.once('connect', () => {
    open++;
    s.write(head);
  });
  s.once('close', () => {
    if (s.bytesWritten === 0) refused++;
    else lifetimes.push(performance.now() - opened);
    open = Math.max(0, open - 1);
  });
  sockets.push(s);
  if (i % 100 === 99) await sleep(10);
}
const dribble = setInterval(() => {
  for (const s of sockets) if (!s.destroyed) s.write('a');
}, EVERY_MS);

const probes: Array<{ ok: boolean; ms: number }> = [];
const started = Date.now();
let maxOpen = 0;
while (Date.now() - started < DURATION_MS) {
  probes.push(await probe());
  maxOpen = Math.max(maxOpen, sockets.filter((s) => !s.destroyed).length);
  await sleep(200);
}
clearInterval(dribble);
const stillOpen = sockets.filter((s) => !s.destroyed).length;
for (const s of sockets) s.destroy();
server.kill('SIGKILL');
await drop?.();
fs.rmSync(dataDir, { recursive: true, force: true });

const ok = probes.filter((p) => p.ok);
const sorted = ok.map((p) => p.ms).sort((a, b) => a - b);
const lt = lifetimes.sort((a, b) => a - b);
console.log(
  JSON.stringify({
    slow: SLOW,
    every_ms: EVERY_MS,
    nofile: NOFILE,
    duration_ms: DURATION_MS,
    probes: probes.length,
    probes_ok: ok.length,
    probe_p99_ms: sorted.length ? Math.round(sorted[Math.floor(sorted.length * 0.99)]!) : null,
    slow_max_open: maxOpen,
    slow_still_open_at_end: stillOpen,
    slow_closed_without_a_byte_sent: refused,
    slow_lifetime_p50_ms: lt.length ? Math.round(lt[Math.floor(lt.length / 2)]!) : null,
  }),
);
