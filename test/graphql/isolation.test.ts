/**
 * Tenancy: a slug resolves only inside the caller's workspace. Another workspace's slug,
 * in the same organization or another one, answers exactly like an unknown slug, for the
 * queried model and for the joined one; and the same slug in two organizations names two
 * different models whose facts never mix.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import * as admin from '../../src/admin/service.ts';
import { seedTenant, startApp, tokenFor, type Tenant, type TestApp } from '../helpers/app.ts';
import { createModel, gql, gqlClient, insertFacts, uniqueSlug, type Model } from './helpers.ts';

let t: TestApp;
let a: Tenant;
let b: Tenant;
let aClient: ReturnType<typeof gqlClient>;
let bClient: ReturnType<typeof gqlClient>;
let aModel: Model;
let siblingModel: Model;
let bModel: Model;
let sameSlugA: Model;
let sameSlugB: Model;

const FIELDS = [
  { name: 'k', type: 'string' as const, is_primary_key: true },
  { name: 'owner', type: 'string' as const },
];

before(async () => {
  t = await startApp();
  a = await seedTenant(t.deps);
  b = await seedTenant(t.deps);
  aClient = gqlClient(t, await tokenFor(t, a));
  bClient = gqlClient(t, await tokenFor(t, b));
  // A second workspace of A's organization.
  const ws = await admin.createWorkspace(t.deps.db, { organization_id: a.organizationId, name: 'Sibling' });
  aModel = await createModel(t.deps, a, uniqueSlug('a'), FIELDS);
  siblingModel = await createModel(t.deps, { organizationId: a.organizationId, workspaceId: ws.id }, uniqueSlug('sib'), FIELDS);
  bModel = await createModel(t.deps, b, uniqueSlug('b'), FIELDS);
  const shared = uniqueSlug('same');
  sameSlugA = await createModel(t.deps, a, shared, FIELDS);
  sameSlugB = await createModel(t.deps, b, shared, FIELDS);
  const fact = (owner: string) => [{ entity_id: 'e1', observed_at: '2026-01-01T00:00:00Z', data: { k: 'e1', owner } }];
  await insertFacts(t.deps, aModel, fact('a'));
  await insertFacts(t.deps, siblingModel, fact('sibling'));
  await insertFacts(t.deps, bModel, fact('b'));
  await insertFacts(t.deps, sameSlugA, fact('a'));
  await insertFacts(t.deps, sameSlugB, fact('b'));
});
after(async () => {
  await t?.close();
});

const Q = 'query($s: String!, $j: String) { factQuery(dataModelSlug: $s, joinDataModelSlug: $j) { count results { dataModelId data } } }';

/** Everything of the response a caller can observe, minus the request id. */
async function observe(client: ReturnType<typeof gqlClient>, vars: Record<string, unknown>) {
  const r = await gql(client, Q, vars);
  const headers = Object.fromEntries(
    [...r.headers].filter(([k]) => !['x-request-id', 'date', 'ratelimit', 'content-length', 'keep-alive', 'connection'].includes(k)),
  );
  return { status: r.status, headers, data: r.data, errors: r.errors };
}

test("another workspace's slug answers exactly like an unknown slug", async () => {
  const unknown = await observe(aClient, { s: uniqueSlug('none') });
  assert.equal(unknown.status, 200);
  assert.equal(unknown.errors?.[0]?.extensions?.code, 'graphql_validation');
  assert.deepEqual(await observe(aClient, { s: siblingModel.slug }), unknown, 'sibling workspace of the same organization');
  assert.deepEqual(await observe(aClient, { s: bModel.slug }), unknown, 'another organization');
});

test("another workspace's slug as the joined model answers exactly like an unknown one", async () => {
  const unknown = await observe(aClient, { s: aModel.slug, j: uniqueSlug('none') });
  assert.equal(unknown.errors?.[0]?.extensions?.code, 'graphql_validation');
  assert.equal(unknown.errors?.[0]?.extensions?.argument, 'joinDataModelSlug');
  assert.deepEqual(await observe(aClient, { s: aModel.slug, j: siblingModel.slug }), unknown);
  assert.deepEqual(await observe(aClient, { s: aModel.slug, j: bModel.slug }), unknown);
});

test('the same slug in two organizations: each caller sees its own model and facts only', async () => {
  const ra = await gql(aClient, Q, { s: sameSlugA.slug, j: sameSlugA.slug });
  const rb = await gql(bClient, Q, { s: sameSlugB.slug, j: sameSlugB.slug });
  assert.equal(ra.data.factQuery.count, 1);
  assert.equal(rb.data.factQuery.count, 1);
  const da = ra.data.factQuery.results[0];
  const db = rb.data.factQuery.results[0];
  assert.equal(da.dataModelId, sameSlugA.id);
  assert.equal(db.dataModelId, sameSlugB.id);
  // The self-join reads the caller's own model too.
  assert.deepEqual(JSON.parse(da.data), { k: 'e1', owner: 'a', [sameSlugA.slug]: { k: 'e1', owner: 'a' } });
  assert.deepEqual(JSON.parse(db.data), { k: 'e1', owner: 'b', [sameSlugB.slug]: { k: 'e1', owner: 'b' } });
});

test('an account moved to the sibling workspace sees that workspace, and no longer the first', async () => {
  const acct = await seedTenant(t.deps);
  const ws = await admin.createWorkspace(t.deps.db, { organization_id: acct.organizationId, name: 'Next' });
  const first = await createModel(t.deps, acct, uniqueSlug('first'), FIELDS);
  const second = await createModel(t.deps, { organizationId: acct.organizationId, workspaceId: ws.id }, uniqueSlug('second'), FIELDS);
  await admin.updateCredential(t.deps.db, acct.credentialId, { workspace_id: ws.id }, new Date(t.deps.clock()));
  const client = gqlClient(t, await tokenFor(t, acct));
  assert.equal((await gql(client, Q, { s: second.slug })).data.factQuery.count, 0);
  assert.equal((await gql(client, Q, { s: first.slug })).errors?.[0]?.extensions?.code, 'graphql_validation');
});

test('a token minted before a move is refused, whatever slug it names (the slugs are looked up with the account)', async () => {
  const acct = await seedTenant(t.deps);
  const model = await createModel(t.deps, acct, uniqueSlug('old'), FIELDS);
  const client = gqlClient(t, await tokenFor(t, acct));
  assert.equal((await gql(client, Q, { s: model.slug })).data.factQuery.count, 0);
  const ws = await admin.createWorkspace(t.deps.db, { organization_id: acct.organizationId, name: 'Moved' });
  await admin.updateCredential(t.deps.db, acct.credentialId, { workspace_id: ws.id }, new Date(t.deps.clock()));
  const r = await gql(client, Q, { s: model.slug });
  assert.equal(r.status, 401);
  assert.equal(r.data, undefined);
});

test('slugs named through aliases, fragments, variables and variable defaults resolve as literals do', async () => {
  const query = `query($s: String!, $d: String = "${sameSlugA.slug}", $u: String!) {
    lit: factQuery(dataModelSlug: "${aModel.slug}") { count results { dataModelId } }
    ...F
    byDefault: factQuery(dataModelSlug: $d) { count results { dataModelId } }
    unknown: factQuery(dataModelSlug: $u) { count }
    joined: factQuery(dataModelSlug: $s, joinDataModelSlug: "${sameSlugA.slug}") { results { data } }
  }
  fragment F on Query { viaFragment: factQuery(dataModelSlug: $s) { results { dataModelId } } }`;
  const r = await gql(aClient, query, { s: aModel.slug, u: siblingModel.slug });
  assert.equal(r.status, 200);
  assert.equal(r.data.lit.results[0].dataModelId, aModel.id);
  assert.equal(r.data.viaFragment.results[0].dataModelId, aModel.id);
  assert.equal(r.data.byDefault.results[0].dataModelId, sameSlugA.id);
  assert.deepEqual(JSON.parse(r.data.joined.results[0].data)[sameSlugA.slug], { k: 'e1', owner: 'a' });
  assert.equal(r.data.unknown, null);
  assert.deepEqual(
    r.errors?.map((e) => [e.path, e.extensions?.code]),
    [[['unknown'], 'graphql_validation']],
  );
});
