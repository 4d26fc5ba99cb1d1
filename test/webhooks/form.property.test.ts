/**
 * Properties of the form decoder (src/webhooks/form.ts): any fields object a sender's
 * URLSearchParams encodes decodes back to itself (a name sent again as every value, in
 * order); `__proto__` and `constructor` names are left out and reach no prototype; a
 * `payload` field decodes as the same JSON sent as a JSON body would.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { AppError } from '../../src/errors.ts';
import { parseJson } from '../../src/json.ts';
import { decodeForm, formPayload, MAX_FORM_FIELDS, type FormFields } from '../../src/webhooks/form.ts';
import { runs } from '../helpers/property.ts';

const PROTOTYPE_NAMES = ['__proto__', 'constructor'];

/** Text a sender can put in a form: any code points (URLSearchParams spells a lone surrogate as U+FFFD). */
const text = fc.string({ unit: 'binary', maxLength: 12 }).filter((s) => s.isWellFormed());
const name = fc.oneof(text, fc.constantFrom('payload_', 'a', 'a[]', 'user[name]', 'toString', 'hasOwnProperty', '0', '10', '?q', '+ &=%'));
const value = fc.oneof(text, fc.array(text, { minLength: 2, maxLength: 4 }));
const fields = fc.dictionary(
  name.filter((n) => !PROTOTYPE_NAMES.includes(n) && n !== 'payload'),
  value,
  { maxKeys: 20 },
);

/** What a sender's form library writes for these fields: one name=value pair per value, in order. */
function encode(f: Record<string, string | string[]>, extra: Array<[string, string]> = []): string {
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(f)) for (const one of Array.isArray(v) ? v : [v]) params.append(k, one);
  for (const [k, v] of extra) params.append(k, v);
  return params.toString();
}

/** As a plain object, for deepStrictEqual (the decoder's has no prototype). */
const plain = (f: FormFields) => ({ ...f });

test('any fields object round-trips through URLSearchParams', () => {
  fc.assert(
    fc.property(fields, (f) => {
      const decoded = decodeForm(encode(f));
      assert.equal(Object.getPrototypeOf(decoded), null);
      assert.deepStrictEqual(plain(decoded), plain(f));
      // The run's payload of a form without a payload field is the fields, unless one holds a NUL (unstorable).
      const nul = Object.entries(f).some(([k, v]) => [k, v].flat().some((x) => x.includes('\0')));
      if (nul) assert.throws(() => formPayload(encode(f)), /cannot store \(at \//);
      else assert.deepStrictEqual(JSON.parse(JSON.stringify(formPayload(encode(f)))), plain(f));
    }),
    { numRuns: runs(500) },
  );
});

test('__proto__ and constructor names are left out, wherever they come, and pollute nothing', () => {
  const extra = fc.array(fc.tuple(fc.constantFrom(...PROTOTYPE_NAMES), text), { minLength: 1, maxLength: 4 });
  fc.assert(
    fc.property(fields, extra, (f, bad) => {
      const decoded = decodeForm(encode(f, bad));
      for (const n of PROTOTYPE_NAMES) assert.equal(Object.hasOwn(decoded, n), false);
      assert.equal(Object.getPrototypeOf(decoded), null);
      assert.deepStrictEqual(plain(decoded), plain(f));
      assert.equal(({} as Record<string, unknown>).polluted, undefined);
      assert.equal(Object.prototype.constructor, Object);
    }),
    { numRuns: runs(300) },
  );
  const decoded = decodeForm('__proto__[polluted]=1&__proto__=x&constructor[prototype][polluted]=1');
  assert.deepStrictEqual(plain(decoded), { '__proto__[polluted]': '1', 'constructor[prototype][polluted]': '1' });
  assert.equal(({} as Record<string, unknown>).polluted, undefined);
});

test('a payload field decodes as the same JSON sent as a JSON body (payload member aside)', () => {
  const json = fc.jsonValue({ maxDepth: 4 });
  fc.assert(
    fc.property(json, fields, (v, others) => {
      const textOfJson = JSON.stringify(v);
      let expected: unknown;
      try {
        expected = parseJson(textOfJson);
      } catch (err) {
        assert.ok(err instanceof AppError);
        assert.throws(() => formPayload(encode(others, [['payload', textOfJson]])), AppError);
        return;
      }
      // The other fields are left out: the payload is the field's JSON alone.
      assert.deepStrictEqual(formPayload(encode(others, [['payload', textOfJson]])), expected);
    }),
    { numRuns: runs(300) },
  );
});

test('a leading "?" belongs to the first name; + is a space; the field bound counts parts', () => {
  assert.deepStrictEqual(plain(decodeForm('?a=1&b=x+y%2B')), { '?a': '1', b: 'x y+' });
  assert.deepStrictEqual(plain(decodeForm('a')), { a: '' });
  const parts = (n: number) => Array.from({ length: n }, (_, i) => `f${i}=${i}`).join('&');
  assert.equal(Object.keys(decodeForm(parts(MAX_FORM_FIELDS))).length, MAX_FORM_FIELDS);
  assert.throws(
    () => decodeForm(parts(MAX_FORM_FIELDS + 1)),
    (err: AppError) => err.code === 'invalid_request' && /more than 1000 fields/.test(err.detail),
  );
  assert.throws(() => decodeForm('&'.repeat(MAX_FORM_FIELDS)), AppError, 'empty parts count too: the bound is on the scan');
});
