import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { jsonApi, seedTenant, startApp, tokenFor, type TestApp } from '../helpers/app.ts';

let t: TestApp;
before(async () => {
  t = await startApp();
});
after(async () => {
  await t.close();
});

test('health and readiness answer over a real socket', async () => {
  assert.equal((await fetch(`${t.url}/healthz`)).status, 200);
  const ready = await fetch(`${t.url}/readyz`);
  assert.equal(ready.status, 200);
  assert.ok(ready.headers.get('x-request-id'));
});

test('a token reads the own organization', async () => {
  const tenant = await seedTenant(t.deps);
  const api = jsonApi(t, await tokenFor(t, tenant));
  const res = await api.get('/api/json/v1/organizations');
  assert.equal(res.status, 200);
  assert.deepEqual(
    res.body.data.map((o: any) => o.id),
    [tenant.organizationId],
  );
});
