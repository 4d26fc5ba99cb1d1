/**
 * Unstorable text (NUL, unpaired surrogates) anywhere in a JSON document, as a string or a
 * member name, escaped or raw: parseJson finds the first with its pointer; clean documents
 * of any Unicode text pass untouched.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { AppError } from '../../src/errors.ts';
import { parseJson } from '../../src/json.ts';
import { unstorableTextAt } from '../../src/json.ts';
import { runs } from '../helpers/property.ts';

// Any Unicode text without NUL: whole graphemes are well-formed by construction.
const cleanText = fc.string({ unit: 'grapheme', maxLength: 12 }).map((s) => s.replaceAll('\0', ''));
const cleanKey = cleanText.filter((k) => k !== '__proto__' && k !== 'constructor');
const { clean } = fc.letrec<{ clean: unknown }>((tie) => ({
  clean: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.oneof(cleanText, fc.integer(), fc.boolean(), fc.constant(null)),
    fc.array(tie('clean'), { maxLength: 4 }),
    fc.dictionary(cleanKey, tie('clean'), { maxKeys: 4 }),
  ),
}));
const BAD = ['\0', '\ud800', '\udbff', '\udc00', '\udfff'];
const badText = fc.tuple(cleanText, fc.constantFrom(...BAD), cleanText);

const token = (k: string) => k.replaceAll('~', '~0').replaceAll('/', '~1');
const hex = (c: string) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;

/**
 * The document with the `slot`-th place (in document order: a string, a member name, or
 * room for one more member or item) holding the bad text, and the pointer expected for it.
 */
function inject(doc: unknown, slot: number, [a, bad, c]: [string, string, string]): { doc: unknown; at: string } {
  let n = 0;
  let at: string | undefined;
  const walk = (v: unknown, here: string): unknown => {
    if (typeof v === 'string') {
      if (n++ !== slot) return v;
      at = here;
      return a + bad + c;
    }
    if (Array.isArray(v)) {
      const out = v.map((x, i) => walk(x, `${here}/${i}`));
      if (n++ === slot) {
        at = `${here}/${out.length}`;
        out.push(a + bad + c);
      }
      return out;
    }
    if (typeof v === 'object' && v !== null) {
      const out: Record<string, unknown> = {};
      for (const [k, x] of Object.entries(v)) {
        if (n++ === slot && !Object.hasOwn(v, a + bad + c)) {
          // This member's name becomes the bad one; its value stays.
          at = `${here}/${token(a + hex(bad) + c)}`;
          out[a + bad + c] = x;
          n += 1_000_000; // nothing below is the first any more
          continue;
        }
        out[k] = walk(x, `${here}/${token(k)}`);
      }
      return out;
    }
    return v;
  };
  const out = walk(doc, '');
  if (at === undefined) return { doc: { [`${a}${bad}${c}`]: 1 }, at: `/${token(a + hex(bad) + c)}` };
  return { doc: out, at };
}

/** JSON text with unpaired surrogates raw rather than escaped (NUL must stay escaped in JSON). */
const rawSurrogates = (text: string) =>
  text.replace(/(\\\\)|\\u(d[89a-f][0-9a-f]{2})/g, (m, pair: string | undefined, h: string) => (pair ? m : String.fromCharCode(parseInt(h, 16))));

function refusedAt(text: string): string | undefined {
  try {
    parseJson(text);
    return undefined;
  } catch (err) {
    assert.ok(err instanceof AppError && err.status === 422, String(err));
    return err.source?.pointer;
  }
}

describe('unstorable text in a JSON document (property)', () => {
  it('clean documents of any Unicode text pass, escaped or raw', () => {
    fc.assert(
      fc.property(clean, (doc) => {
        const text = JSON.stringify(doc);
        const expected: unknown = JSON.parse(text);
        assert.deepEqual(parseJson(text), expected);
        assert.equal(unstorableTextAt(doc), undefined);
        // Every non-ASCII character escaped, surrogate pairs as two escapes.
        const escaped = text.replace(/[\u0080-\uffff]/g, hex);
        assert.deepEqual(parseJson(escaped), expected);
      }),
      { numRuns: runs(300) },
    );
  });

  it('one bad string or member name anywhere is found at its pointer, escaped or raw', () => {
    fc.assert(
      fc.property(clean, fc.nat(40), badText, (base, slot, bad) => {
        const { doc, at } = inject(base, slot, bad);
        const text = JSON.stringify(doc);
        assert.equal(refusedAt(text), at, text);
        assert.equal(refusedAt(rawSurrogates(text)), at, text);
        assert.equal(unstorableTextAt(doc), at);
      }),
      { numRuns: runs(500) },
    );
  });

  it('of several, the first in document order is named', () => {
    assert.equal(unstorableTextAt({ a: 'ok', b: ['x', '\ud800', '\0'], c: '\0' }), '/b/1');
    assert.equal(unstorableTextAt({ 'a\0': '\ud800' }), '/a\\u0000');
    assert.equal(unstorableTextAt({ a: { 'b\udc00/~': 1 } }), '/a/b\\udc00~1~0');
  });
});
