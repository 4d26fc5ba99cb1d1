/**
 * Property: ndjsonLines, fed any text cut into chunks at any byte (inside a UTF-8 sequence,
 * between CR and LF), yields the lines a plain split of the whole text gives, with lines
 * over the limit replaced by the marker; the limit counts bytes, not characters.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { ndjsonLines, type NdjsonLine } from '../../src/facts/ndjson.ts';
import { runs } from '../helpers/property.ts';

/** The reference: the whole text at once. */
function reference(text: string, max: number): NdjsonLine[] {
  if (text === '') return [];
  const lines = text.split('\n');
  if (text.endsWith('\n')) lines.pop();
  return lines.map((l) => (l.endsWith('\r') ? l.slice(0, -1) : l)).map((l) => (Buffer.byteLength(l) > max ? { tooLong: true } : l));
}

async function collect(chunks: Buffer[], max: number): Promise<NdjsonLine[]> {
  async function* source() {
    for (const c of chunks) yield c;
  }
  const out: NdjsonLine[] = [];
  for await (const line of ndjsonLines(source(), max)) out.push(typeof line === 'string' ? line : { tooLong: line.tooLong });
  return out;
}

/** Cuts `bytes` at the given fractions of its length. */
function cut(bytes: Buffer, at: number[]): Buffer[] {
  const points = [...new Set(at.map((f) => Math.floor(f * bytes.length)))].sort((a, b) => a - b);
  const out: Buffer[] = [];
  let from = 0;
  for (const p of points) {
    out.push(bytes.subarray(from, p));
    from = p;
  }
  out.push(bytes.subarray(from));
  return out;
}

const piece = fc.constantFrom('a', 'bc', '{"k":1}', ' ', 'é', '€', '😀', '\n', '\r', '\r\n', '\n\n', '\ufeff');

test('ndjsonLines agrees with splitting the whole text, for any chunking and limit', async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.array(piece, { maxLength: 60 }),
      fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { maxLength: 12 }),
      fc.integer({ min: 0, max: 24 }),
      async (pieces, at, max) => {
        const text = pieces.join('');
        assert.deepEqual(await collect(cut(Buffer.from(text), at), max), reference(text, max));
      },
    ),
    { numRuns: runs(1000) },
  );
});

test('a line of 64 MiB in 1,000 chunks is one too-long line, and the next line is read', async () => {
  const max = 1024;
  const chunks = [Buffer.from('first\n'), ...Array.from({ length: 1000 }, () => Buffer.alloc(64 * 1024, 0x61)), Buffer.from('\r\nlast')];
  assert.deepEqual(await collect(chunks, max), ['first', { tooLong: true }, 'last']);
});
