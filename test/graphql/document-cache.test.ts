/** The parsed-document cache of POST /api/graphql: bounded, validation computed once, parse errors not kept. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { GraphQLError } from 'graphql';
import { createDocumentCache } from '../../src/graphql/document-cache.ts';
import { schema } from '../../src/graphql/schema.ts';

const opts = { maxEntries: 3, maxChars: 1000, maxTokens: 8000 };

test('the same text gives the same parsed document; validation runs once and is kept', () => {
  const cache = createDocumentCache(schema, opts);
  const a = cache.parse('{ health }');
  assert.equal(cache.parse('{ health }'), a);
  assert.deepEqual(cache.validate(a), []);
  const bad = cache.parse('{ nope }');
  const errors = cache.validate(bad);
  assert.equal(errors.length, 1);
  assert.match(errors[0]!.message, /Cannot query field "nope"/);
  assert.equal(cache.validate(cache.parse('{ nope }')), errors);
});

test('a syntax error is thrown each time and never cached', () => {
  const cache = createDocumentCache(schema, opts);
  assert.throws(() => cache.parse('{ health'), GraphQLError);
  assert.throws(() => cache.parse('{ health'), GraphQLError);
  assert.equal(cache.size, 0);
});

test('least recently used entries leave first, by count and by total length', () => {
  const cache = createDocumentCache(schema, opts);
  const one = cache.parse('{ a1: health }');
  cache.parse('{ a2: health }');
  cache.parse('{ a3: health }');
  assert.equal(cache.parse('{ a1: health }'), one, 'a hit refreshes the entry');
  cache.parse('{ a4: health }');
  assert.equal(cache.size, 3);
  assert.equal(cache.parse('{ a1: health }'), one, 'a1 was used recently and stays');
  assert.equal(cache.size, 3);

  const long = `{ ${'x'.repeat(1001)}: health }`;
  cache.parse(long);
  assert.equal(cache.size, 3, 'a text longer than the whole budget is parsed but not kept');
  const big = `{ ${'y'.repeat(984)}: health }`; // 995 characters: only room for itself
  cache.parse(big);
  assert.equal(cache.size, 1, 'a large text pushes the others out to stay within the character budget');
});
