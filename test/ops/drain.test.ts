/**
 * stop() (what SIGTERM runs) on keep-alive connections, over raw sockets: a request that
 * reached the server before the drain gets its whole response, with Connection: close, and
 * its connection then ends without a reset; an idle keep-alive connection is closed; a
 * request still running when SHUTDOWN_GRACE_MS ends is logged (method and route) and cut off.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pino from 'pino';
import { loadConfig } from '../../src/config.ts';
import { serve } from '../../src/server.ts';
import { freshPostgresDatabase } from '../helpers/app.ts';

const GRACE_MS = 1_000;
const cleanups: Array<() => Promise<void> | void> = [];
after(async () => {
  for (const c of cleanups.reverse()) await c();
});

/** A raw client connection that records what it receives and how it ends. */
class Conn {
  text = '';
  ended = false;
  closed = false;
  error: string | undefined;
  readonly socket: net.Socket;
  readonly gone: Promise<void>;
  constructor(port: number) {
    this.socket = net.connect(port, '127.0.0.1');
    this.socket.setEncoding('utf8').on('data', (s: string) => (this.text += s));
    this.socket.on('end', () => (this.ended = true));
    this.socket.on('error', (err: NodeJS.ErrnoException) => (this.error = err.code ?? err.message));
    this.gone = new Promise((resolve) => this.socket.on('close', () => ((this.closed = true), resolve())));
  }
  async ready(): Promise<this> {
    await new Promise<void>((resolve, reject) => this.socket.once('connect', resolve).once('error', reject));
    return this;
  }
  /** Waits for `n` complete responses (Content-Length bodies). */
  async responses(n: number, withinMs = 5_000): Promise<Array<{ status: number; headers: Record<string, string>; body: string }>> {
    const deadline = Date.now() + withinMs;
    for (;;) {
      const parsed = parseResponses(this.text);
      if (parsed.length >= n) return parsed;
      if (Date.now() > deadline || this.closed) assert.fail(`${parsed.length} of ${n} responses; received: ${JSON.stringify(this.text)}; error: ${this.error}`);
      await sleep(10);
    }
  }
}

function parseResponses(text: string): Array<{ status: number; headers: Record<string, string>; body: string }> {
  const out = [];
  let rest = text;
  for (;;) {
    const end = rest.indexOf('\r\n\r\n');
    if (end < 0) return out;
    const [statusLine, ...lines] = rest.slice(0, end).split('\r\n');
    const headers: Record<string, string> = {};
    for (const l of lines) headers[l.slice(0, l.indexOf(':')).toLowerCase()] = l.slice(l.indexOf(':') + 1).trim();
    const length = Number(headers['content-length']);
    const body = rest.slice(end + 4, end + 4 + length);
    if (Buffer.byteLength(body) < length) return out;
    out.push({ status: Number(statusLine!.split(' ')[1]), headers, body });
    rest = rest.slice(end + 4 + length);
  }
}

const graphqlHead = (length: number, query = '') =>
  `POST /api/graphql${query} HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`;

test(
  'stop(): a request in flight on a keep-alive connection completes with Connection: close, idle connections close, none is reset; one past the grace period is logged and cut off',
  { timeout: 120_000 },
  async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tributary-drain-'));
    cleanups.push(() => fs.rmSync(dataDir, { recursive: true, force: true }));
    const env: Record<string, string> = { DATA_DIR: dataDir, PORT: '0', LOG_LEVEL: 'info', SHUTDOWN_GRACE_MS: String(GRACE_MS), REQUEST_TIMEOUT_MS: '60000' };
    if (process.env.DATABASE_URL) {
      const fresh = await freshPostgresDatabase();
      cleanups.push(fresh.drop);
      env.DATABASE_URL = fresh.url;
    }
    const lines: Array<Record<string, unknown>> = [];
    const log = pino(
      { level: 'info' },
      new Writable({
        write(chunk, _enc, cb) {
          for (const line of String(chunk).split('\n')) if (line.trim()) lines.push(JSON.parse(line));
          cb();
        },
      }),
    );
    const running = await serve(loadConfig(env), { http: true, worker: false, log });
    let stopped = false;
    cleanups.push(() => (stopped ? undefined : running.stop()));
    const port = Number(new URL(running.url).port);

    // Keep-alive connections, each having served one request.
    const idle = await new Conn(port).ready();
    idle.socket.write('GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n');
    const [first] = await idle.responses(1);
    assert.equal(first!.status, 200);
    assert.equal(first!.headers.connection, 'keep-alive', 'before the drain, connections are kept');
    const busy = await new Conn(port).ready();
    busy.socket.write('GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n');
    await busy.responses(1);

    // Requests that reached the server: their bodies are half sent.
    const body = JSON.stringify({ query: '{ health }' });
    busy.socket.write(graphqlHead(body.length) + body.slice(0, 5));
    const stuck = await new Conn(port).ready();
    stuck.socket.write(graphqlHead(body.length, '?trace=tbat_not-a-real-token') + body.slice(0, 5));
    await sleep(200);

    const started = Date.now();
    const stopping = running.stop();
    await sleep(100);

    // The idle connection is closed by the server, in order (FIN), not reset.
    await idle.gone;
    assert.equal(idle.error, undefined);
    assert.equal(idle.ended, true);

    // The busy one finishes its request: a whole answer that says the connection closes, then a clean end.
    busy.socket.write(body.slice(5));
    const answers = await busy.responses(2);
    assert.equal(answers[1]!.status, 200, answers[1]!.body);
    assert.deepEqual(JSON.parse(answers[1]!.body).data, { health: 'ok' });
    assert.equal(answers[1]!.headers.connection, 'close');
    await busy.gone;
    assert.equal(busy.error, undefined, 'not reset');
    assert.equal(busy.ended, true);

    // New connections are refused while draining.
    const late = new Conn(port);
    await late.gone;
    assert.equal(late.error, 'ECONNREFUSED');

    // The stuck request holds the drain until the grace period ends, then is cut off and logged.
    await stopping;
    stopped = true;
    assert.ok(Date.now() - started >= GRACE_MS - 50, `stopped after ${Date.now() - started} ms`);
    await stuck.gone;
    const cut = lines.filter((l) => l.msg === 'request cut off at shutdown');
    assert.equal(cut.length, 1, JSON.stringify(lines));
    assert.equal(cut[0]!.level, 40);
    assert.equal(cut[0]!.method, 'POST');
    assert.equal(cut[0]!.route, '/api/graphql');
    assert.equal(typeof cut[0]!.reqId, 'string');
    assert.doesNotMatch(JSON.stringify(cut[0]), /tbat_|trace/);
  },
);
