/**
 * The SDK is bundled for browsers too (the console): no Node module, no Node-only global, and
 * UUIDs from crypto.getRandomValues (crypto.randomUUID is missing on plain-http pages).
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { builtinModules } from 'node:module';
import path from 'node:path';
import { it } from 'node:test';
import { uuidV4 } from '../../packages/client/src/uuid.ts';

const SRC = path.join(import.meta.dirname, '../../packages/client/src');

function files(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? files(path.join(dir, e.name)) : [path.join(dir, e.name)]));
}

// import/export ... from 'x', import 'x', import('x'), require('x').
const SPECIFIER = /\bfrom\s*['"]([^'"]+)['"]|^\s*import\s*['"]([^'"]+)['"]|\bimport\(\s*['"]([^'"]+)['"]\s*\)|\brequire\(\s*['"]([^'"]+)['"]\s*\)/gm;
const BUILTIN = new Set(builtinModules);

const sources = files(SRC).filter((f) => f.endsWith('.ts'));

it('no file under packages/client/src imports a Node module', () => {
  assert.ok(sources.length >= 6 && sources.some((f) => f.endsWith('index.ts')), 'the rule reads the sources');
  const found: string[] = [];
  for (const file of sources) {
    for (const m of fs.readFileSync(file, 'utf8').matchAll(SPECIFIER)) {
      const spec = (m[1] ?? m[2] ?? m[3] ?? m[4])!;
      if (spec.startsWith('node:') || BUILTIN.has(spec)) found.push(`${path.relative(SRC, file)}: ${spec}`);
    }
  }
  assert.deepEqual(found, []);
});

it('no file under packages/client/src uses a Node-only global', () => {
  const NODE_ONLY = /\b(process|Buffer|__dirname|__filename|setImmediate|NodeJS)\b|\bglobal\./;
  const found: string[] = [];
  for (const file of sources) {
    const code = fs
      .readFileSync(file, 'utf8')
      .replace(/\/\*[^]*?\*\//g, '')
      .replace(/\/\/.*$/gm, '');
    const m = NODE_ONLY.exec(code);
    if (m) found.push(`${path.relative(SRC, file)}: ${m[0]}`);
  }
  assert.deepEqual(found, []);
});

it('uuidV4 makes version 4, variant 1 UUIDs from getRandomValues, never the same twice', () => {
  const seen = new Set<string>();
  for (let i = 0; i < 1000; i++) {
    const u = uuidV4();
    assert.match(u, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    seen.add(u);
  }
  assert.equal(seen.size, 1000);
  const own = Object.getOwnPropertyDescriptor(globalThis.crypto, 'randomUUID');
  try {
    // As on a plain-http page of another host than localhost.
    Object.defineProperty(globalThis.crypto, 'randomUUID', { value: undefined, configurable: true });
    assert.match(uuidV4(), /^[0-9a-f-]{36}$/);
  } finally {
    if (own) Object.defineProperty(globalThis.crypto, 'randomUUID', own);
    else delete (globalThis.crypto as { randomUUID?: unknown }).randomUUID;
  }
});
