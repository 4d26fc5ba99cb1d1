/**
 * Every data model slug the docs and the README show is one the API accepts (lowercase
 * letters, digits and hyphens): an example a reader pastes is not refused for its slug.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { SLUG_RE } from '../../src/input.ts';
import { ROOT } from '../helpers/cli.ts';

const FILES = [
  'README.md',
  'packages/client/README.md',
  ...fs
    .readdirSync(path.join(ROOT, 'docs'), { recursive: true })
    .map(String)
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

/** Where a slug stands in an example: a step's config, a GraphQL argument, a JSON:API attribute, a data model file, the CLI. */
const SLUG_PLACES = [
  /"?(?:data_model_slug|dataModelSlug|joinDataModelSlug)"?\s*[:=]\s*\\?["']?([^\s"'\\,)}]+)/g,
  /"slug"\s*:\s*\\?"([^"\\]*)/g,
  /^slug:\s*(\S+)/gm,
  /--data-model[ =]([^\s$'"]+)/g,
];

test('every slug in the docs examples is valid', () => {
  const seen: string[] = [];
  const bad: string[] = [];
  for (const file of FILES) {
    const text = fs.readFileSync(path.join(ROOT, file), 'utf8');
    for (const re of SLUG_PLACES)
      for (const m of text.matchAll(re)) {
        const slug = m[1]!;
        // A placeholder (<slug>, $MODEL, {slug}, SLUG), a GraphQL type (String!) or a variable is not an example value.
        if (/^[<${A-Z]|^\.\.\.$/.test(slug)) continue;
        seen.push(slug);
        if (!SLUG_RE.test(slug)) bad.push(`${file}: ${slug}`);
      }
  }
  assert.ok(seen.length >= 10, `the examples were found (${seen.length})`);
  assert.deepEqual(bad, []);
});
