/**
 * Lists and reads by id re-check the account in the statement that reads the rows, and
 * their hot statements are compiled once: the checks hold as on every other route.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import * as admin from '../../src/admin/service.ts';
import { compileOnce, slot } from '../../src/db/compiled.ts';
import { jsonApi, seedAccount, seedTenant, startApp, tokenFor, type Tenant, type TestApp } from '../helpers/app.ts';

let t: TestApp;
let tenant: Tenant;
before(async () => {
  t = await startApp();
  tenant = await seedTenant(t.deps);
});
after(() => t.close());

const MODELS = '/api/json/v1/data_models';

test('a list reads only the caller workspace rows, in its order and pages', async () => {
  const other = await seedTenant(t.deps);
  const mine = jsonApi(t, await tokenFor(t, tenant));
  const theirs = jsonApi(t, await tokenFor(t, other));
  for (const slug of ['a-one', 'a-two', 'a-three'])
    assert.equal((await mine.post(MODELS, { data: { type: 'data_model', attributes: { name: slug, slug } } })).status, 201);
  assert.equal((await theirs.post(MODELS, { data: { type: 'data_model', attributes: { name: 'theirs', slug: 'theirs' } } })).status, 201);
  const page = await mine.get(`${MODELS}?sort=slug&page[limit]=2`);
  assert.equal(page.status, 200, page.text);
  assert.deepEqual(
    page.body.data.map((r: { attributes: { slug: string } }) => r.attributes.slug),
    ['a-one', 'a-three'],
  );
  assert.ok(page.body.links.next, 'a next page');
  const rest = await mine.get(page.body.links.next);
  assert.deepEqual(
    rest.body.data.map((r: { attributes: { slug: string } }) => r.attributes.slug),
    ['a-two'],
  );
  const empty = await theirs.get(`${MODELS}?filter[slug]=a-one`);
  assert.deepEqual(empty.body.data, [], 'another workspace sees none of them');
});

test('a deactivated account gets 401 on a list, also with a query that could not be read', async () => {
  const acct = await seedAccount(t.deps, tenant, { role: 'member', scopes: ['api_read'] });
  const api = jsonApi(t, await tokenFor(t, acct));
  assert.equal((await api.get(MODELS)).status, 200);
  await admin.updateCredential(t.deps.db, acct.credentialId, { is_active: false }, new Date(t.deps.clock()));
  assert.equal((await api.get(MODELS)).status, 401);
  assert.equal((await api.get(`${MODELS}?filter[nope]=1`)).status, 401, 'the account first, then the query');
});

test('without api_read a list is 403, before a bad query is 400', async () => {
  const acct = await seedAccount(t.deps, tenant, { role: 'member', scopes: ['api_write'] });
  const api = jsonApi(t, await tokenFor(t, acct));
  assert.equal((await api.get(MODELS)).status, 403);
  assert.equal((await api.get(`${MODELS}?filter[nope]=1`)).status, 403);
});

test('a statement compiled once binds its slots by name and keeps its fixed parameters', () => {
  const stmt = compileOnce(
    t.deps.db.selectFrom('data_models').select('id').where('workspace_id', '=', slot('ws')).where('slug', '=', 'fixed').where('id', '=', slot('id')),
  );
  assert.deepEqual(stmt.bind({ ws: 'W', id: 'I' }), ['W', 'fixed', 'I']);
  assert.throws(() => stmt.bind({ ws: 'W' }), /no value for the slot id/);
});
