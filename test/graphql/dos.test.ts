/**
 * Hostile documents: each is refused with the right code, without running away, and never with a 5xx.
 * Also pins the calibration of the complexity limit and the exact
 * boundaries of depth 10 and 8,000 tokens.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { seedTenant, startApp, tokenFor, type TestApp } from '../helpers/app.ts';
import { createModel, FACT_FIELDS, gql, gqlClient, uniqueSlug, type GqlResponse } from './helpers.ts';
import { RUNAWAY_MS } from '../helpers/runaway.ts';

let t: TestApp;
let client: ReturnType<typeof gqlClient>;
let anon: ReturnType<typeof gqlClient>;
let slug: string;
let joinSlug: string;

before(async () => {
  t = await startApp({ RATE_LIMIT_MAX: '100000' });
  const tenant = await seedTenant(t.deps);
  client = gqlClient(t, await tokenFor(t, tenant));
  anon = gqlClient(t);
  slug = uniqueSlug();
  joinSlug = uniqueSlug();
  await createModel(t.deps, tenant, slug, [{ name: 'k', type: 'string', is_primary_key: true }]);
  await createModel(t.deps, tenant, joinSlug, [{ name: 'k', type: 'string', is_primary_key: true }]);
});
after(async () => {
  await t?.close();
});

async function timed(c: ReturnType<typeof gqlClient>, query: string, variables?: Record<string, unknown>): Promise<GqlResponse & { ms: number }> {
  const start = performance.now();
  const r = await gql(c, query, variables);
  return { ...r, ms: performance.now() - start };
}

function assertRefused(r: GqlResponse & { ms: number }, code: string): void {
  assert.ok(r.status < 500, `status ${r.status}`);
  assert.equal(r.status, 200, JSON.stringify(r.errors)?.slice(0, 500));
  assert.equal(r.errors?.length, 1, JSON.stringify(r.errors)?.slice(0, 500));
  assert.equal(r.errors![0]!.extensions?.code, code, r.errors![0]!.message);
  // Refused before execution (no data), or by the resolver (the field is null).
  assert.ok(r.data == null || Object.values(r.data).every((v) => v === null), JSON.stringify(r.data));
  assert.ok(r.ms < RUNAWAY_MS, `took ${Math.round(r.ms)} ms`);
}

/** Without a valid token only health may be asked: anything else is 401, quickly. */
function assertUnauthorized(r: GqlResponse & { ms: number }): void {
  assert.equal(r.status, 401, JSON.stringify(r.errors)?.slice(0, 500));
  assert.equal(r.errors?.[0]?.extensions?.code, 'unauthorized');
  assert.equal(r.data, undefined);
  assert.ok(r.ms < RUNAWAY_MS, `took ${Math.round(r.ms)} ms`);
}

const ALL = `hasNextPage hasPreviousPage pageNumber lastPage limit count results { ${FACT_FIELDS} }`;

describe('complexity calibration', () => {
  test('one factQuery selecting every field with limit 250 fits, with and without a join', async () => {
    const r = await gql(client, `{ factQuery(dataModelSlug: "${slug}", limit: 250) { ${ALL} } }`);
    assert.equal(r.errors, undefined, JSON.stringify(r.errors));
    const j = await gql(client, `{ factQuery(dataModelSlug: "${slug}", limit: 250, joinDataModelSlug: "${joinSlug}", joinType: "inner") { ${ALL} } }`);
    assert.equal(j.errors, undefined, JSON.stringify(j.errors));
  });

  test('complexity 200 is allowed, 201 is not', async () => {
    const aliases = (n: number) => `{ ${Array.from({ length: n }, (_, i) => `h${i}: health`).join(' ')} }`;
    const ok = await gql(client, aliases(200));
    assert.equal(ok.errors, undefined, JSON.stringify(ok.errors)?.slice(0, 300));
    assertRefused(await timed(client, aliases(201)), 'query_too_complex');
  });

  test('ten aliased factQuery fields with limit 250 exceed 200: query_too_complex', async () => {
    const fields = Array.from({ length: 10 }, (_, i) => `q${i}: factQuery(dataModelSlug: "${slug}", limit: 250) { ${ALL} }`).join(' ');
    assertRefused(await timed(client, `{ ${fields} }`), 'query_too_complex');
  });

  test('a limit given as a variable counts the same as a literal; the default limit is 50', async () => {
    const fields = Array.from({ length: 10 }, (_, i) => `q${i}: factQuery(dataModelSlug: "${slug}", limit: $l) { ${ALL} }`).join(' ');
    assertRefused(await timed(client, `query($l: Int) { ${fields} }`, { l: 250 }), 'query_too_complex');
    assertRefused(await timed(client, `query($l: Int = 250) { ${fields} }`), 'query_too_complex');
    // Two default-limit pages of everything fit.
    const two = Array.from({ length: 2 }, (_, i) => `q${i}: factQuery(dataModelSlug: "${slug}") { ${ALL} }`).join(' ');
    assert.equal((await gql(client, `{ ${two} }`)).errors, undefined);
  });

  test('the complexity of a document sums all its operations, since all are validated', async () => {
    const two = Array.from({ length: 2 }, (_, i) => `q${i}: factQuery(dataModelSlug: "${slug}", limit: 250) { ${ALL} }`).join(' ');
    assert.equal((await gql(client, `query A { ${two} }`)).errors, undefined);
    const r = await timed(client, `query A { ${two} } query B { ${two} }`);
    assertRefused(r, 'query_too_complex');
  });

  test('a limit above 250 is reported as graphql_validation, not as complexity', async () => {
    const r = await timed(client, `{ factQuery(dataModelSlug: "${slug}", limit: 100000) { ${ALL} } }`);
    assert.equal(r.errors?.[0]?.extensions?.code, 'graphql_validation');
  });
});

describe('hostile documents', () => {
  test('1,000 aliases: query_too_complex; without a token only health ones get that far', async () => {
    const health = Array.from({ length: 1000 }, (_, i) => `a${i}: health`).join(' ');
    assertRefused(await timed(anon, `{ ${health} }`), 'query_too_complex');
    const fq = Array.from({ length: 1000 }, (_, i) => `a${i}: factQuery(dataModelSlug: "${slug}") { count }`).join(' ');
    assertRefused(await timed(client, `{ ${fq} }`), 'query_too_complex');
    assertUnauthorized(await timed(anon, `{ ${fq} }`));
  });

  test('thousands of repeated fields (the quadratic overlap check is never reached)', async () => {
    assertRefused(await timed(anon, `{ ${'__typename '.repeat(7990)}}`), 'query_too_complex');
    assertRefused(await timed(client, `{ ${'health '.repeat(7990)}}`), 'query_too_complex');
  });

  test('deep introspection: depth over 10 is query_too_complex; depth 10 passes', async () => {
    let deep = 'name';
    for (let i = 0; i < 300; i++) deep = `ofType { ${deep} }`;
    assertRefused(await timed(client, `{ __schema { types { fields { type { ${deep} } } } } }`), 'query_too_complex');
    assertUnauthorized(await timed(anon, `{ __schema { types { fields { type { ${deep} } } } } }`));
    const cyclic = '{ __schema { types { fields { type { fields { type { fields { type { fields { type { name } } } } } } } } } } }';
    assertRefused(await timed(client, cyclic), 'query_too_complex');
    // Exactly 10 levels: __schema types fields type + 5 ofType + name.
    const ten = '{ __schema { types { fields { type { ofType { ofType { ofType { ofType { ofType { name } } } } } } } } } }';
    const r = await gql(client, ten);
    assert.equal(r.errors, undefined, JSON.stringify(r.errors));
    const eleven = ten.replace('{ name }', '{ ofType { name } }');
    assertRefused(await timed(client, eleven), 'query_too_complex');
  });

  test('deep nesting through fragments and inline fragments counts too', async () => {
    let frags = 'fragment F0 on __Type { name }';
    for (let i = 1; i <= 12; i++) frags += ` fragment F${i} on __Type { ofType { ...F${i - 1} } }`;
    assertRefused(await timed(client, `{ __type(name: "Fact") { ...F12 } } ${frags}`), 'query_too_complex');
    let inline = 'name';
    for (let i = 0; i < 12; i++) inline = `... on __Type { ofType { ${inline} } }`;
    assertRefused(await timed(client, `{ __type(name: "Fact") { ${inline} } }`), 'query_too_complex');
  });

  test('a fragment bomb (each fragment spreads the next twice) is costed without expanding it', async () => {
    let frags = 'fragment B0 on Query { health }';
    for (let i = 1; i <= 40; i++) frags += ` fragment B${i} on Query { ...B${i - 1} ...B${i - 1} }`;
    assertRefused(await timed(anon, `{ ...B40 } ${frags}`), 'query_too_complex');
  });

  test('fragment cycles are a validation error, not a hang', async () => {
    const r = await timed(anon, '{ ...A } fragment A on Query { health ...B } fragment B on Query { ...A }');
    assertRefused(r, 'graphql_validation');
  });

  test('8,001 tokens: query_too_complex; 8,000 tokens parse; without a token, a document too big to read is 401', async () => {
    // `{ health(x: [1 ... 1]) }` holds 9 tokens besides the list items.
    const doc = (n: number) => `{ health(x: [${' 1'.repeat(n)}]) }`;
    assertRefused(await timed(client, doc(7992)), 'query_too_complex');
    // 8,000 tokens parse; the unknown argument is then a validation error.
    assertRefused(await timed(client, doc(7991)), 'graphql_validation');
    assertRefused(await timed(anon, doc(7991)), 'graphql_validation');
    assertRefused(await timed(client, `{ ${'health '.repeat(20_000)}}`), 'query_too_complex');
    assertUnauthorized(await timed(anon, doc(7992)));
    assertUnauthorized(await timed(anon, `{ ${'health '.repeat(20_000)}}`));
  });

  test('deep nesting of lists, objects or selections is refused before the recursive parser runs', async () => {
    assertRefused(await timed(client, `{ health(x: ${'['.repeat(3900)}1${']'.repeat(3900)}) }`), 'query_too_complex');
    assertRefused(await timed(client, `{ health(x: ${'{a:'.repeat(2000)}1${'}'.repeat(2000)}) }`), 'query_too_complex');
    assertUnauthorized(await timed(anon, `{ health(x: ${'['.repeat(3900)}1${']'.repeat(3900)}) }`));
    assertRefused(await timed(client, `${'{ a '.repeat(2600)}${'}'.repeat(2600)}`), 'query_too_complex');
    assertRefused(await timed(client, `query { ${'... on Query { '.repeat(1500)} health ${'}'.repeat(1500)} }`), 'query_too_complex');
    // Unbalanced brackets are a plain syntax error (401 without a token: it cannot be read).
    assertRefused(await timed(client, `{ health(x: ${'['.repeat(20)}) }`), 'graphql_validation');
    assertUnauthorized(await timed(anon, `{ health(x: ${'['.repeat(20)}) }`));
  });

  test('a huge filters string, deep filter JSON, huge in-lists: graphql_validation, quickly', async () => {
    const q =
      'query($f: String, $j: String) { factQuery(dataModelSlug: "' +
      slug +
      '", filters: $f, joinDataModelSlug: "' +
      joinSlug +
      '", joinFilters: $j) { count } }';
    assertRefused(await timed(client, q, { f: 'x'.repeat(900_000) }), 'graphql_validation');
    assertRefused(
      await timed(client, q, { f: JSON.stringify([{ field: 'k', op: 'in', value: Array.from({ length: 60_000 }, (_, i) => `v${i}`) }]) }),
      'graphql_validation',
    );
    assertRefused(await timed(client, q, { f: '['.repeat(100_000) }), 'graphql_validation');
    assertRefused(
      await timed(client, q, { j: JSON.stringify(Array.from({ length: 5000 }, () => ({ field: 'k', op: 'eq', value: 'x' }))) }),
      'graphql_validation',
    );
    // A long value inside the size limit is just a value.
    const long = await timed(client, q, { f: JSON.stringify([{ field: 'k', op: 'eq', value: 'x'.repeat(150_000) }]) });
    assert.deepEqual(long.data, { factQuery: { count: 0 } });
    assert.ok(long.ms < RUNAWAY_MS);
    // Twenty clauses of 1,000 values each are allowed, and answered quickly.
    const big = JSON.stringify(Array.from({ length: 20 }, () => ({ field: 'k', op: 'nin', value: Array.from({ length: 1000 }, (_, i) => `v${i}`) })));
    const ok = await timed(client, q, { f: big });
    assert.equal(ok.errors, undefined, JSON.stringify(ok.errors)?.slice(0, 300));
  });

  test('a huge string literal or comment in the document', async () => {
    assertRefused(await timed(client, `{ factQuery(dataModelSlug: "${'a'.repeat(500_000)}") { count } }`), 'graphql_validation');
    const comment = await timed(anon, `# ${'x'.repeat(500_000)}\n{ health }`);
    assert.deepEqual(comment.data, { health: 'ok' });
  });

  test('a body over the limit is 413, not 5xx', async () => {
    const res = await fetch(`${t.url}/api/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query: `# ${'x'.repeat(1_100_000)}\n{ health }` }),
    });
    assert.equal(res.status, 413);
    assert.equal(res.headers.get('x-graphql-schema-version'), '2026-07-05');
    assert.equal(((await res.json()) as any).errors[0].extensions.code, 'payload_too_large');
  });

  test('hostile strings in filters never reach the database as text it refuses', async () => {
    const q = `query($f: String) { factQuery(dataModelSlug: "${slug}", filters: $f) { count } }`;
    for (const value of ['a\u0000b', '\ud800', 'x\udfff']) {
      for (const op of ['eq', 'contains', 'starts_with', 'in']) {
        const r = await timed(client, q, { f: JSON.stringify([{ field: 'k', op, value: op === 'in' ? [value] : value }]) });
        assertRefused(r, 'graphql_validation');
      }
    }
    // Quotes, backslashes and SQL in values are just values.
    const sqlish = await gql(client, q, {
      f: JSON.stringify([
        { field: 'k', op: 'eq', value: "x'; drop table facts; --" },
        { field: 'k', op: 'contains', value: '\\%_' },
      ]),
    });
    assert.deepEqual(sqlish.data, { factQuery: { count: 0 } });
  });
});
