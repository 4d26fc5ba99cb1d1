/**
 * The HTTP surface of POST /api/graphql: who may ask (401/403 and the public health
 * field), the rate window shared with JSON:API (429), the request envelope (400/415,
 * graphql_validation for query/variables), the schema version header on every response,
 * and the served schema, read back through introspection, equal to schema.graphql.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { buildClientSchema, getIntrospectionQuery, printSchema, type IntrospectionQuery } from 'graphql';
import * as admin from '../../src/admin/service.ts';
import { jsonApi, seedAccount, seedTenant, startApp, tokenFor, type Tenant, type TestApp } from '../helpers/app.ts';
import { createModel, gql, gqlClient, onFactStatements, onlyCode, uniqueSlug, type GqlResponse } from './helpers.ts';

const VERSION = '2026-07-05';
const FQ = (slug: string) => `{ factQuery(dataModelSlug: "${slug}") { count results { id } } }`;

let t: TestApp;
let tenant: Tenant;
let token: string;
let slug: string;

before(async () => {
  t = await startApp();
  tenant = await seedTenant(t.deps);
  token = await tokenFor(t, tenant);
  slug = uniqueSlug();
  await createModel(t.deps, tenant, slug, [{ name: 'k', type: 'string', is_primary_key: true }]);
});
after(async () => {
  await t?.close();
});

async function post(body: string | undefined, headers: Record<string, string> = { 'content-type': 'application/json' }, method = 'POST') {
  const res = await fetch(`${t.url}/api/graphql`, { method, headers, body });
  const text = await res.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json };
}

function assertHttpError(r: { status: number; headers: Headers; json?: any; errors?: unknown }, status: number, code: string): void {
  const errors = (r as { json?: { errors?: any[] } }).json?.errors ?? (r as GqlResponse).errors;
  assert.equal(r.status, status, JSON.stringify(errors));
  assert.equal(r.headers.get('x-graphql-schema-version'), VERSION);
  assert.equal(errors?.length, 1);
  assert.equal(errors![0].extensions.code, code);
}

describe('who may ask', () => {
  test('without a token: factQuery is 401 with WWW-Authenticate: Bearer', async () => {
    const r = await gql(gqlClient(t), FQ(slug));
    assertHttpError(r, 401, 'unauthorized');
    assert.equal(r.headers.get('www-authenticate'), 'Bearer');
    assert.equal(r.data, undefined);
  });

  test('with an invalid token: 401 with error="invalid_token"', async () => {
    for (const bad of [`${token}x`, 'not-a-token', token.slice(0, -4)]) {
      const r = await gql(gqlClient(t, bad), FQ(slug));
      assertHttpError(r, 401, 'unauthorized');
      assert.equal(r.headers.get('www-authenticate'), 'Bearer error="invalid_token"');
    }
    const basic = await post(JSON.stringify({ query: FQ(slug) }), { 'content-type': 'application/json', authorization: 'Basic Zm9vOmJhcg==' });
    assertHttpError(basic, 401, 'unauthorized');
  });

  test('health and __typename need no token, also through fragments; a bad token does not matter', async () => {
    for (const client of [gqlClient(t), gqlClient(t, 'garbage')]) {
      const r = await gql(client, '{ health __typename }');
      assert.equal(r.status, 200);
      assert.deepEqual(r.data, { health: 'ok', __typename: 'Query' });
      assert.equal(r.headers.get('x-graphql-schema-version'), VERSION);
      const f = await gql(client, 'query Probe { ...H ... on Query { h2: health } } fragment H on Query { health }');
      assert.deepEqual(f.data, { health: 'ok', h2: 'ok' });
    }
  });

  test('anything else without a token is 401: introspection, factQuery beside health, unknown fields, mutations', async () => {
    for (const q of [
      '{ __schema { queryType { name } } }',
      '{ __type(name: "Fact") { name } }',
      `{ health ${FQ(slug).slice(1, -1)} }`,
      '{ nope }',
      'mutation { health }',
      '{ ...F } fragment F on Query { factQuery(dataModelSlug: "x") { count } }',
    ]) {
      assertHttpError(await gql(gqlClient(t), q), 401, 'unauthorized');
    }
  });

  test('a token without api_read is 403 forbidden; so is a token narrowed to api_write', async () => {
    const writer = await seedAccount(t.deps, tenant, { scopes: ['api_write'] });
    assertHttpError(await gql(gqlClient(t, await tokenFor(t, writer)), FQ(slug)), 403, 'forbidden');
    const narrowed = await tokenFor(t, tenant, 'api_write');
    assertHttpError(await gql(gqlClient(t, narrowed), FQ(slug)), 403, 'forbidden');
    // The scope taken away after minting counts on the very next request.
    const reader = await seedAccount(t.deps, tenant, { scopes: ['api_read'] });
    const readerToken = await tokenFor(t, reader);
    assert.equal((await gql(gqlClient(t, readerToken), FQ(slug))).status, 200);
    await admin.updateCredential(t.deps.db, reader.credentialId, { scopes: ['api_write'] }, new Date(t.deps.clock()));
    assertHttpError(await gql(gqlClient(t, readerToken), FQ(slug)), 403, 'forbidden');
  });

  test('an inactive run-as membership is 403 forbidden', async () => {
    const acct = await seedAccount(t.deps, tenant, { scopes: ['api_read'] });
    const tok = await tokenFor(t, acct);
    assert.equal((await gql(gqlClient(t, tok), FQ(slug))).status, 200);
    await admin.deactivateMember(t.deps.db, acct.membershipId, new Date(t.deps.clock()));
    assertHttpError(await gql(gqlClient(t, tok), FQ(slug)), 403, 'forbidden');
  });

  test('a deactivated account is 401', async () => {
    const acct = await seedAccount(t.deps, tenant, { scopes: ['api_read'] });
    const tok = await tokenFor(t, acct);
    await admin.updateCredential(t.deps.db, acct.credentialId, { is_active: false }, new Date(t.deps.clock()));
    assertHttpError(await gql(gqlClient(t, tok), FQ(slug)), 401, 'unauthorized');
    // Whatever it sends: the account is checked before the document's syntax and cost.
    const deep = `{ __schema { types { fields { type { ${'ofType { '.repeat(12)}name${' }'.repeat(12)} } } } } }`;
    for (const q of ['{ factQuery(', deep, 'query A { health } query B { factQuery(dataModelSlug: "x") { count } }']) {
      assertHttpError(await gql(gqlClient(t, tok), q), 401, 'unauthorized');
    }
  });

  test('without a token, a document that cannot be read is 401; one whose operations all ask only health is answered', async () => {
    assertHttpError(await gql(gqlClient(t), '{ health'), 401, 'unauthorized');
    assertHttpError(await gql(gqlClient(t), `{ ${'health '.repeat(8001)}}`), 401, 'unauthorized');
    // Two public operations and no operationName: the ambiguity is the caller's error to hear.
    assertHttpError(await post(JSON.stringify({ query: 'query A { health } query B { __typename }' })), 200, 'graphql_validation');
    // One of them asking for more: 401 before the ambiguity.
    assertHttpError(await post(JSON.stringify({ query: `query A { health } query B { ${FQ(slug).slice(1, -1)} }` })), 401, 'unauthorized');
    // Too costly though public: query_too_complex, as with a token.
    assertHttpError(await gql(gqlClient(t), `{ ${Array.from({ length: 201 }, (_, i) => `h${i}: health`).join(' ')} }`), 200, 'query_too_complex');
  });
});

describe('the request envelope', () => {
  test('a body that is not JSON, or not a JSON object, is 400 bad_request', async () => {
    for (const body of ['{"query": ', 'null', '[{"query":"{ health }"}]', '"{ health }"', '42']) {
      assertHttpError(await post(body), 400, 'bad_request');
    }
    assertHttpError(await post(''), 400, 'bad_request');
  });

  test('JSON nested deeper than 64 levels (in variables, say) is 422 invalid_request before it is parsed', async () => {
    const deep = (n: number) => `{"query": "{ health }", "variables": {"v": ${'['.repeat(n)}${']'.repeat(n)}}}`;
    assertHttpError(await post(deep(63)), 422, 'invalid_request');
    // 64 levels in all (the body object, variables, then 62 arrays) are read.
    const ok = await post(deep(62));
    assert.equal(ok.status, 200, ok.text);
  });

  test('a Content-Type other than application/json is 415', async () => {
    assertHttpError(await post('{ health }', { 'content-type': 'application/graphql' }), 415, 'unsupported_media_type');
    assertHttpError(await post('query=%7Bhealth%7D', { 'content-type': 'application/x-www-form-urlencoded' }), 415, 'unsupported_media_type');
    assertHttpError(await post(JSON.stringify({ query: '{ health }' }), {}), 415, 'unsupported_media_type');
    const ok = await post(JSON.stringify({ query: '{ health }' }), { 'content-type': 'application/json; charset=utf-8' });
    assert.equal(ok.status, 200, ok.text);
  });

  test('other methods are 405 with Allow: POST', async () => {
    const r = await post(undefined, {}, 'GET');
    assertHttpError(r, 405, 'method_not_allowed');
    assert.equal(r.headers.get('allow'), 'POST');
  });

  test('missing or ill-typed query, variables or operationName: 200 graphql_validation', async () => {
    for (const body of [
      {},
      { query: 42 },
      { query: '' },
      { query: '{ health }', variables: [1] },
      { query: '{ health }', variables: 'x' },
      { query: '{ health }', operationName: 7 },
    ]) {
      assertHttpError(await post(JSON.stringify(body)), 200, 'graphql_validation');
    }
    const nullVars = await post(JSON.stringify({ query: '{ health }', variables: null, operationName: null }));
    assert.deepEqual(nullVars.json, { data: { health: 'ok' } });
  });

  test('syntax errors and unknown fields: 200 graphql_validation with locations', async () => {
    const client = gqlClient(t, token);
    const syntax = await gql(client, '{ health');
    assertHttpError(syntax, 200, 'graphql_validation');
    assert.ok(syntax.errors![0]!.message.startsWith('Syntax Error'));
    const unknown = await gql(client, '{ factQuery(dataModelSlug: "x") { nope } }');
    assert.equal(unknown.status, 200);
    assert.equal(unknown.errors![0]!.extensions!.code, 'graphql_validation');
    assert.ok((unknown.errors![0] as any).locations.length > 0);
    assert.equal(unknown.data, undefined);
  });

  test('operations: a mutation, an ambiguous document, an unknown operationName are graphql_validation; operationName picks one', async () => {
    const client = gqlClient(t, token);
    assertHttpError(await gql(client, 'mutation { health }'), 200, 'graphql_validation');
    const two = 'query A { health } query B { __typename }';
    assertHttpError(await post(JSON.stringify({ query: two })), 200, 'graphql_validation');
    assertHttpError(await post(JSON.stringify({ query: two, operationName: 'C' })), 200, 'graphql_validation');
    assert.deepEqual((await post(JSON.stringify({ query: two, operationName: 'B' }))).json, { data: { __typename: 'Query' } });
    assert.equal(onlyCode(await gql(client, 'subscription { health }')), 'graphql_validation');
  });

  test('variables: wrong types and missing required ones are graphql_validation', async () => {
    const client = gqlClient(t, token);
    const q = 'query($s: String!, $l: Int, $u: DateTime) { factQuery(dataModelSlug: $s, limit: $l, until: $u) { count } }';
    assert.equal(onlyCode(await gql(client, q, { s: slug, l: 'ten' })), 'graphql_validation');
    assert.equal(onlyCode(await gql(client, q, {})), 'graphql_validation');
    assert.equal(onlyCode(await gql(client, q, { s: slug, u: 'yesterday' })), 'graphql_validation');
    assert.equal(onlyCode(await gql(client, q, { s: slug, l: 2 ** 31 })), 'graphql_validation');
    const ok = await gql(client, q, { s: slug, l: 10, u: '2026-01-01T00:00:00+02:00' });
    assert.deepEqual(ok.data, { factQuery: { count: 0 } });
  });

  test('every response carries x-graphql-schema-version, and x-request-id', async () => {
    const responses = [
      await post(JSON.stringify({ query: '{ health }' })),
      await post('nope'),
      await post('{}', { 'content-type': 'text/plain' }),
      await post(JSON.stringify({ query: FQ(slug) })),
      await post(undefined, {}, 'DELETE'),
    ];
    for (const r of responses) {
      assert.equal(r.headers.get('x-graphql-schema-version'), VERSION, `${r.status} ${r.text}`);
      assert.ok(r.headers.get('x-request-id'));
      assert.match(r.headers.get('content-type') ?? '', /^application\/json/);
    }
  });
});

describe("failures that are not the caller's", () => {
  /** Runs `fn` while every statement on the fact tables fails with `error`. */
  function failing(error: Error, fn: () => Promise<void>): Promise<void> {
    return onFactStatements(
      t,
      () => {
        throw error;
      },
      fn,
    );
  }

  test('a database error is 500 internal_error without detail; a lost connection is 503 with Retry-After', async () => {
    await failing(Object.assign(new Error('relation "facts" does not exist at /srv/app.ts'), { code: '42P01' }), async () => {
      const r = await gql(gqlClient(t, token), FQ(slug));
      assertHttpError(r, 500, 'internal_error');
      assert.equal(r.errors![0]!.message, 'An unexpected error occurred');
      assert.deepEqual(r.errors![0]!.path, ['factQuery']);
      assert.deepEqual(r.data, { factQuery: null });
    });
    await failing(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }), async () => {
      const r = await gql(gqlClient(t, token), FQ(slug));
      assertHttpError(r, 503, 'unavailable');
      assert.equal(r.headers.get('retry-after'), '5');
      assert.doesNotMatch(JSON.stringify(r.errors), /127\.0\.0\.1|ECONNREFUSED/);
    });
  });
});

describe('the rate window', () => {
  let rt: TestApp;
  const MAX = 4;
  before(async () => {
    rt = await startApp({ RATE_LIMIT_MAX: String(MAX), RATE_LIMIT_WINDOW_SECONDS: '60' });
  });
  after(async () => {
    await rt?.close();
  });

  /** Windows align to the clock; start well inside one so a boundary cannot reset the count mid-test. */
  async function awayFromWindowEdge(): Promise<void> {
    const left = 60_000 - (Date.now() % 60_000);
    if (left < 8_000) await sleep(left + 100);
  }

  test('429 rate_limited with Retry-After once the per-account window is spent, shared with JSON:API', async () => {
    const tn = await seedTenant(rt.deps);
    const tok = await tokenFor(rt, tn);
    const m = uniqueSlug();
    await createModel(rt.deps, tn, m, []);
    await awayFromWindowEdge();
    const client = gqlClient(rt, tok);
    for (let i = 1; i < MAX; i++) {
      const r = await gql(client, FQ(m));
      assert.equal(r.status, 200, JSON.stringify(r.errors));
      assert.equal(r.headers.get('ratelimit-policy'), `"default";q=${MAX};w=60`);
    }
    // The last request of the window is spent on JSON:API: one budget per account.
    assert.equal((await jsonApi(rt, tok).get('/api/json/v1/organizations')).status, 200);
    const limited = await gql(client, FQ(m));
    assertHttpError(limited, 429, 'rate_limited');
    const retry = Number(limited.headers.get('retry-after'));
    assert.ok(retry >= 1 && retry <= 60, `Retry-After ${retry}`);
    // health needs no token and counts against no window.
    assert.equal((await gql(gqlClient(rt), '{ health }')).status, 200);
    // Another account of the same workspace has its own window.
    const other = await seedAccount(rt.deps, tn, { scopes: ['api_read'] });
    assert.equal((await gql(gqlClient(rt, await tokenFor(rt, other)), FQ(m))).status, 200);
  });
});

describe('the schema', () => {
  test('the served schema, read through introspection, prints exactly as schema.graphql', async () => {
    const file = fs.readFileSync(new URL('../../schema.graphql', import.meta.url), 'utf8');
    // typeDepth 4 keeps the standard introspection query within the depth limit of 10.
    const r = await gql<IntrospectionQuery>(gqlClient(t, token), getIntrospectionQuery({ typeDepth: 4, descriptions: true }));
    assert.equal(r.status, 200, JSON.stringify(r.errors));
    assert.equal(r.errors, undefined);
    const served = printSchema(buildClientSchema(r.data!));
    assert.equal(served.trim(), file.trim());
    assert.ok(file.endsWith('\n'));
  });

  test('the schema has every argument and default of the contract, no mutations, no subscriptions', async () => {
    const r = await gql<IntrospectionQuery>(gqlClient(t, token), getIntrospectionQuery({ typeDepth: 4 }));
    const s = r.data!.__schema;
    assert.equal(s.mutationType, null);
    assert.equal(s.subscriptionType, null);
    const query = s.types.find((x) => x.name === 'Query') as any;
    const fq = query.fields.find((f: any) => f.name === 'factQuery');
    const args = Object.fromEntries(fq.args.map((a: any) => [a.name, a.defaultValue]));
    assert.deepEqual(args, {
      dataModelSlug: null,
      mode: '"latest"',
      timeAxis: '"observed_at"',
      since: null,
      until: null,
      filters: null,
      sort: '"observed_at"',
      sortDirection: '"desc"',
      limit: '50',
      offset: '0',
      joinDataModelSlug: null,
      joinType: '"left"',
      joinFilters: null,
    });
  });

  test('the default introspection query (typeDepth 9) is deeper than 10: query_too_complex', async () => {
    const r = await gql(gqlClient(t, token), getIntrospectionQuery());
    assert.equal(r.status, 200);
    assert.equal(onlyCode(r), 'query_too_complex');
  });
});
