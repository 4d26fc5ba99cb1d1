/**
 * No list answer is built past LIST_MAX_BYTES (issue 19, item 3): a default page holds the
 * resources that fit and links to the rest; a page[limit] asked for past it is 400 with a
 * hint at page[limit] and fields. Shown with API specifications, whose documents are large.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { assertJsonApiError, jsonApi, seedTenant, startApp, tokenFor } from '../helpers/app.ts';

const PATH = '/api/json/v1/api_specs';
const MAX = 64 * 1024;
const t = await startApp({ LIST_MAX_BYTES: String(MAX) });
test.after(() => t.close());
const api = jsonApi(t, await tokenFor(t, await seedTenant(t.deps)));

/** A valid document of about `kib` KiB. */
const spec = (n: number, kib: number) => `openapi: 3.0.3\ninfo: {title: S${n}, version: '1', description: ${'x'.repeat(kib * 1024)}}\npaths: {}\n`;

const ids: string[] = [];
for (let i = 0; i < 6; i++) {
  const r = await api.post(PATH, { data: { type: 'api_spec', attributes: { name: `S${i}`, format: 'yaml', raw_document: spec(i, 20) } } });
  assert.equal(r.status, 201, r.text.slice(0, 300));
  ids.push(r.body.data.id);
}

test('a default page holds what fits under LIST_MAX_BYTES and links to the rest; following the links reads every resource once', async () => {
  const seen: string[] = [];
  let next: string | null = PATH;
  let pages = 0;
  while (next) {
    const r = await api.get(next);
    assert.equal(r.status, 200, r.text.slice(0, 300));
    assert.ok(r.text.length <= MAX, `${r.text.length} bytes`);
    assert.ok(r.body.data.length >= 1);
    seen.push(...r.body.data.map((d: any) => d.id));
    next = r.body.links.next;
    pages++;
  }
  assert.ok(pages > 1);
  assert.deepEqual([...seen].sort(), [...ids].sort());
});

test('a page[limit] whose answer would pass LIST_MAX_BYTES is 400 naming what fits; fewer attributes fit', async () => {
  const r = await api.get(`${PATH}?page[limit]=6`);
  assertJsonApiError(r, 400, 'invalid_query', { parameter: 'page[limit]' });
  assert.match(
    r.body.errors[0].detail,
    /larger than 65536 bytes \(LIST_MAX_BYTES\); (about )?[1-5] api_spec resources fit: ask for page\[limit\]=[1-5], or for fewer attributes with fields\[api_spec\]/,
  );
  const narrow = await api.get(`${PATH}?page[limit]=6&fields[api_spec]=name,title`);
  assert.equal(narrow.status, 200);
  assert.equal(narrow.body.data.length, 6);
});

test('one resource larger than LIST_MAX_BYTES still makes a default page of one', async () => {
  const big = await api.post(PATH, { data: { type: 'api_spec', attributes: { name: 'Huge', format: 'yaml', raw_document: spec(99, 80) } } });
  assert.equal(big.status, 201);
  const r = await api.get(PATH);
  assert.equal(r.status, 200);
  assert.deepEqual(
    r.body.data.map((d: any) => d.id),
    [big.body.data.id],
  );
  assert.ok(r.body.links.next);
});

test('rows past the budget never leave the database: a page reads what fits, and a sparse fieldset reads no document', async () => {
  // What the list statements return, counted where the app runs them.
  const db = t.deps.db as unknown as { executeQuery: (...args: any[]) => Promise<{ rows: Record<string, unknown>[] }> };
  const original = db.executeQuery.bind(db);
  const returned: Array<Record<string, unknown>[]> = [];
  db.executeQuery = async (...args: any[]) => {
    const result = await original(...args);
    if (/api_specs/.test(String(args[0]?.sql))) returned.push(result.rows);
    return result;
  };
  try {
    const r = await api.get(PATH);
    assert.equal(r.status, 200);
    const rows = returned.flat().filter((row) => typeof row.raw_document === 'string');
    // 20 KiB documents under a 64 KiB budget: about three, never the page of 50 the limit allows.
    assert.ok(rows.length >= 1 && rows.length <= 4, `${rows.length} documents read`);
    returned.length = 0;
    const narrow = await api.get(`${PATH}?fields[api_spec]=name`);
    assert.equal(narrow.status, 200);
    assert.ok(narrow.body.data.length >= 6);
    assert.ok(
      returned.flat().every((row) => !('raw_document' in row) && !('operations' in row)),
      'no large column was selected',
    );
  } finally {
    db.executeQuery = original;
  }
});
