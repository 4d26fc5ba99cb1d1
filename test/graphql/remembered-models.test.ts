/**
 * With the document's models remembered from an earlier request, a factQuery is one round
 * trip (the account re-check, the models' fingerprint, the page and the count), and
 * every change still takes effect on the very next request: the account's, a new field, a
 * renamed slug.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as admin from '../../src/admin/service.ts';
import { uuidv7 } from '../../src/ids.ts';
import { ENGINE, seedAccount, startApp, seedTenant, tokenFor } from '../helpers/app.ts';
import { createModel, gql, gqlClient, insertFacts, onlyCode, uniqueSlug } from './helpers.ts';

const t = await startApp();
test.after(() => t.close());
const tenant = await seedTenant(t.deps);
const T0 = Date.parse('2026-01-01T00:00:00Z');

const query = (slug: string, filters?: unknown) =>
  `{ factQuery(dataModelSlug: "${slug}"${filters ? `, filters: ${JSON.stringify(JSON.stringify(filters))}` : ''}) { count results { entityId } } }`;

/** Every statement the database runs while `fn` runs (a builder embedded in another is compiled, not run). */
async function statements(fn: () => Promise<unknown>): Promise<string[]> {
  const compiled = new Map<unknown, string>();
  const seen: string[] = [];
  const original = t.deps.db;
  t.deps.db = original.withPlugin({
    transformQuery(args) {
      compiled.set(args.queryId, original.getExecutor().compileQuery(args.node, args.queryId).sql);
      return args.node;
    },
    async transformResult(args) {
      seen.push(compiled.get(args.queryId) ?? '(compiled once)');
      return args.result;
    },
  });
  try {
    await fn();
  } finally {
    t.deps.db = original;
  }
  return seen;
}

test('the second factQuery of a document is one statement and answers the same', async () => {
  const slug = uniqueSlug();
  const model = await createModel(t.deps, tenant, slug, [{ name: 'k', type: 'string', is_primary_key: true }]);
  await insertFacts(t.deps, model, [
    { entity_id: 'a', observed_at: T0, data: { k: 'a' } },
    { entity_id: 'b', observed_at: T0 + 1, data: { k: 'b' } },
  ]);
  const client = gqlClient(t, await tokenFor(t, tenant));
  const first = await gql(client, query(slug));
  assert.equal(first.status, 200, JSON.stringify(first.errors));
  let second: Awaited<ReturnType<typeof gql>> | undefined;
  const seen = await statements(async () => {
    second = await gql(client, query(slug));
  });
  assert.deepEqual(second!.data, first.data);
  assert.equal(second!.data.factQuery.count, 2);
  // One round trip: one statement, or on PostgreSQL the count beside it on another connection.
  assert.equal(seen.length, ENGINE === 'postgres' ? 2 : 1, seen.join('\n---\n'));
  const withAccount = seen.filter((s) => /service_accounts/.test(s));
  assert.equal(withAccount.length, 1);
  assert.match(withAccount[0]!, /fact_current/);
});

test('an account deactivated, or losing api_read, is refused on the next request', async () => {
  const slug = uniqueSlug();
  await createModel(t.deps, tenant, slug, [{ name: 'k', type: 'string', is_primary_key: true }]);
  for (const change of ['deactivate', 'scope'] as const) {
    const acct = await seedAccount(t.deps, tenant, { role: 'member', scopes: ['api_read', 'api_write'] });
    const client = gqlClient(t, await tokenFor(t, acct));
    assert.equal((await gql(client, query(slug))).status, 200);
    assert.equal((await gql(client, query(slug))).status, 200, 'remembered models');
    const patch = change === 'deactivate' ? { is_active: false } : { scopes: ['api_write'] };
    await admin.updateCredential(t.deps.db, acct.credentialId, patch, new Date(t.deps.clock()));
    const r = await gql(client, query(slug));
    assert.equal(r.status, change === 'deactivate' ? 401 : 403, JSON.stringify(r.errors));
    // Also when the query's arguments are wrong: the account comes first.
    assert.equal((await gql(client, query(slug, [{ field: 'nope', op: 'eq', value: 1 }]))).status, change === 'deactivate' ? 401 : 403);
  }
});

test('a field added after the models were remembered can be filtered on at once', async () => {
  const slug = uniqueSlug();
  const model = await createModel(t.deps, tenant, slug, [{ name: 'k', type: 'string', is_primary_key: true }]);
  await insertFacts(t.deps, model, [{ entity_id: 'a', observed_at: T0, data: { k: 'a', tier: 'gold' } }]);
  const client = gqlClient(t, await tokenFor(t, tenant));
  assert.equal((await gql(client, query(slug))).status, 200);
  const refused = await gql(client, query(slug, [{ field: 'tier', op: 'eq', value: 'gold' }]));
  assert.equal(onlyCode(refused), 'graphql_validation', 'not a field yet');
  await t.deps.db
    .insertInto('data_model_fields')
    .values({
      id: uuidv7(),
      organization_id: tenant.organizationId,
      workspace_id: tenant.workspaceId,
      data_model_id: model.id,
      name: 'tier',
      label: 'tier',
      description: null,
      type: 'string',
      is_primary_key: false,
      is_required: false,
      constraints: null,
    })
    .execute();
  const found = await gql(client, query(slug, [{ field: 'tier', op: 'eq', value: 'gold' }]));
  assert.equal(found.status, 200, JSON.stringify(found.errors));
  assert.equal(found.data.factQuery.count, 1);
});

test('a renamed slug: the old one names nothing on the next request, the new one works', async () => {
  const slug = uniqueSlug();
  const renamed = uniqueSlug();
  const model = await createModel(t.deps, tenant, slug, [{ name: 'k', type: 'string', is_primary_key: true }]);
  await insertFacts(t.deps, model, [{ entity_id: 'a', observed_at: T0, data: { k: 'a' } }]);
  const client = gqlClient(t, await tokenFor(t, tenant));
  assert.equal((await gql(client, query(slug))).data.factQuery.count, 1);
  assert.equal((await gql(client, query(slug))).data.factQuery.count, 1, 'remembered');
  await t.deps.db.updateTable('data_models').set({ slug: renamed }).where('id', '=', model.id).execute();
  const old = await gql(client, query(slug));
  assert.equal(onlyCode(old), 'graphql_validation');
  assert.match(old.errors![0]!.message, /does not name a data model/);
  assert.equal((await gql(client, query(renamed))).data.factQuery.count, 1);
});
