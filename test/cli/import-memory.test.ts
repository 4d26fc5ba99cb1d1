/**
 * `tributary facts import` streams its file: what the client holds while uploading does not
 * grow with the file (issue 3: a 1M-line file must not be held in memory). Measured in a
 * child process with --expose-gc (fixtures/upload-memory.ts), live ArrayBuffer memory after
 * full collections, so that garbage not yet collected does not count.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const FIXTURE = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures', 'upload-memory.ts');
const MIB = 1024 * 1024;
// Three times the bound below: a client that kept the file could not pass.
const SIZE_MIB = 24;

test(`uploading a ${SIZE_MIB} MiB file holds at most a few MiB of it at any time`, async () => {
  const out = await new Promise<string>((resolve, reject) =>
    execFile(process.execPath, ['--expose-gc', FIXTURE, String(SIZE_MIB)], { timeout: 120_000 }, (err, stdout, stderr) =>
      err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(stdout),
    ),
  );
  const r = JSON.parse(out) as { sent: number; received: number; peakGrowth: number };
  assert.ok(r.sent >= SIZE_MIB * MIB);
  assert.equal(r.received, r.sent, 'the server got the whole file');
  // A client that keeps what it sent grows by the whole file (all of it with undici's fetch,
  // nodejs/undici#4058); a streaming one by a few chunks.
  assert.ok(r.peakGrowth < 8 * MIB, `live buffers grew by ${(r.peakGrowth / MIB).toFixed(1)} MiB while sending ${(r.sent / MIB).toFixed(0)} MiB`);
});
