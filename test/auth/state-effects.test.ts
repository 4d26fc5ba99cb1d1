/**
 * Checked effects of state: a minted token stops being honoured on the
 * very next request once its account is deactivated, loses a scope, changes workspace or
 * its run-as membership becomes inactive. Plus bearer-token failures and role visibility.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as admin from '../../src/admin/service.ts';
import { jsonApi, seedAccount, seedTenant, tokenFor, type ApiResponse, type Tenant, appWithTenant } from '../helpers/app.ts';

const { t, tenant } = await appWithTenant();

const ORGS = '/api/json/v1/organizations';

/** A JSON:API error document with exactly one error of this status and code. */
function assertJsonApiError(res: ApiResponse, status: number, code: string): void {
  assert.equal(res.status, status, res.text);
  assert.match(res.headers.get('content-type') ?? '', /^application\/vnd\.api\+json/);
  assert.ok(Array.isArray(res.body?.errors), res.text);
  assert.equal(res.body.errors.length, 1);
  assert.equal(res.body.errors[0].status, String(status));
  assert.equal(res.body.errors[0].code, code);
}

function assertInvalidToken(res: ApiResponse): void {
  assertJsonApiError(res, 401, 'unauthorized');
  assert.equal(res.headers.get('www-authenticate'), 'Bearer error="invalid_token"');
}

async function freshAccount(): Promise<{ acct: Tenant; token: string }> {
  const acct = await seedAccount(t.deps, tenant, { role: 'member', scopes: ['api_read', 'api_write'] });
  const token = await tokenFor(t, acct);
  const ok = await jsonApi(t, token).get(ORGS);
  assert.equal(ok.status, 200, `control: the token works before the change: ${ok.text}`);
  return { acct, token };
}

describe('a minted token stops being honoured on the very next request', () => {
  test('account deactivated: 401 invalid_token; re-activated: a new token works again', async () => {
    const { acct, token } = await freshAccount();
    await admin.updateCredential(t.deps.db, acct.credentialId, { is_active: false }, new Date(t.deps.clock()));
    assertInvalidToken(await jsonApi(t, token).get(ORGS));
    // The exchange refuses too while inactive.
    await assert.rejects(tokenFor(t, acct), /token exchange failed: 401/);

    await admin.updateCredential(t.deps.db, acct.credentialId, { is_active: true }, new Date(t.deps.clock()));
    const fresh = await tokenFor(t, acct);
    assert.equal((await jsonApi(t, fresh).get(ORGS)).status, 200);
    // Undoing the deactivation does not revive the token minted before it.
    assertInvalidToken(await jsonApi(t, token).get(ORGS));
  });

  test('moved away and back: the token minted before the move stays refused', async () => {
    const { acct, token } = await freshAccount();
    const other = await admin.createWorkspace(t.deps.db, { organization_id: tenant.organizationId, name: 'Elsewhere' });
    await admin.updateCredential(t.deps.db, acct.credentialId, { workspace_id: other.id }, new Date(t.deps.clock()));
    await admin.updateCredential(t.deps.db, acct.credentialId, { workspace_id: tenant.workspaceId }, new Date(t.deps.clock()));
    assertInvalidToken(await jsonApi(t, token).get(ORGS));
    assert.equal((await jsonApi(t, await tokenFor(t, acct)).get(ORGS)).status, 200);
  });

  test('revoke_tokens: every token minted before is refused, new ones work', async () => {
    const { acct, token } = await freshAccount();
    await admin.updateCredential(t.deps.db, acct.credentialId, { revoke_tokens: true }, new Date(t.deps.clock()));
    assertInvalidToken(await jsonApi(t, token).get(ORGS));
    assert.equal((await jsonApi(t, await tokenFor(t, acct)).get(ORGS)).status, 200);
  });

  test('scope removed (api_write only): GET 403 forbidden, writes still pass the scope check', async () => {
    const { acct, token } = await freshAccount();
    await admin.updateCredential(t.deps.db, acct.credentialId, { scopes: ['api_write'] }, new Date(t.deps.clock()));
    const api = jsonApi(t, token);
    assertJsonApiError(await api.get(ORGS), 403, 'forbidden');
    // The token's api_write is still held: a write is authorised (reaches validation).
    const write = await api.post('/api/json/v1/data_models', {
      data: { type: 'data_model', attributes: { name: 'After scope change', slug: 'after-scope-change' } },
    });
    assert.equal(write.status, 201, write.text);
    // A new token now carries only api_write.
    const narrowed = jsonApi(t, await tokenFor(t, acct));
    assertJsonApiError(await narrowed.get(ORGS), 403, 'forbidden');
  });

  test('re-granting a scope does not widen a token minted without it', async () => {
    const acct = await seedAccount(t.deps, tenant, { scopes: ['api_write'] });
    const token = await tokenFor(t, acct);
    await admin.updateCredential(t.deps.db, acct.credentialId, { scopes: ['api_read', 'api_write'] }, new Date(t.deps.clock()));
    assertJsonApiError(await jsonApi(t, token).get(ORGS), 403, 'forbidden');
  });

  test('account moved to another workspace of the same organization: 401 invalid_token', async () => {
    const { acct, token } = await freshAccount();
    const other = await admin.createWorkspace(t.deps.db, { organization_id: tenant.organizationId, name: 'Other' });
    await admin.updateCredential(t.deps.db, acct.credentialId, { workspace_id: other.id }, new Date(t.deps.clock()));
    assertInvalidToken(await jsonApi(t, token).get(ORGS));
    // A token minted after the move works (in the new workspace).
    assert.equal((await jsonApi(t, await tokenFor(t, acct)).get(ORGS)).status, 200);
  });

  test('run-as membership deactivated: 403 forbidden', async () => {
    const { acct, token } = await freshAccount();
    await admin.deactivateMember(t.deps.db, acct.membershipId, new Date(t.deps.clock()));
    const res = await jsonApi(t, token).get(ORGS);
    assertJsonApiError(res, 403, 'forbidden');
    assert.equal(res.headers.get('www-authenticate'), null);
    await assert.rejects(tokenFor(t, acct), /token exchange failed: 401/);
  });

  test('one account changing state does not affect another account of the workspace', async () => {
    const a = await freshAccount();
    const b = await freshAccount();
    await admin.updateCredential(t.deps.db, a.acct.credentialId, { is_active: false }, new Date(t.deps.clock()));
    assertInvalidToken(await jsonApi(t, a.token).get(ORGS));
    assert.equal((await jsonApi(t, b.token).get(ORGS)).status, 200);
  });
});

describe('the same effects on reads by id (account re-check and row in one statement)', () => {
  /** Every by-id read path: the one-statement types and the role-scoped credential. */
  async function byIdPaths(acct: Tenant, token: string): Promise<string[]> {
    const dm = await jsonApi(t, token).post('/api/json/v1/data_models', {
      data: { type: 'data_model', attributes: { name: 'By id', slug: `by-id-${acct.credentialId.slice(-12)}` } },
    });
    assert.equal(dm.status, 201, dm.text);
    const paths = [
      `/api/json/v1/data_models/${dm.body.data.id}`,
      `/api/json/v1/organizations/${acct.organizationId}`,
      `/api/json/v1/users/${acct.userId}`,
      `/api/json/v1/org_memberships/${acct.membershipId}`,
      `/api/json/v1/credentials/${acct.credentialId}`,
    ];
    for (const p of paths) assert.equal((await jsonApi(t, token).get(p)).status, 200, `control: ${p}`);
    return [...paths, '/api/json/v1/data_models/not-a-uuid', `/api/json/v1/data_models/${crypto.randomUUID()}`];
  }

  test('deactivated, moved, revoked: 401 on every read by id, whatever the id', async () => {
    for (const change of [{ is_active: false }, { revoke_tokens: true }, 'move'] as const) {
      const { acct, token } = await freshAccount();
      const paths = await byIdPaths(acct, token);
      if (change === 'move') {
        const other = await admin.createWorkspace(t.deps.db, { organization_id: tenant.organizationId, name: 'By id move' });
        await admin.updateCredential(t.deps.db, acct.credentialId, { workspace_id: other.id }, new Date(t.deps.clock()));
      } else {
        await admin.updateCredential(t.deps.db, acct.credentialId, change, new Date(t.deps.clock()));
      }
      for (const p of paths) assertInvalidToken(await jsonApi(t, token).get(p));
    }
  });

  test('scope removed or run-as membership inactive: 403 on every read by id, whatever the id', async () => {
    for (const change of ['scope', 'membership'] as const) {
      const { acct, token } = await freshAccount();
      const paths = await byIdPaths(acct, token);
      if (change === 'scope') await admin.updateCredential(t.deps.db, acct.credentialId, { scopes: ['api_write'] }, new Date(t.deps.clock()));
      else await admin.deactivateMember(t.deps.db, acct.membershipId, new Date(t.deps.clock()));
      for (const p of paths) assertJsonApiError(await jsonApi(t, token).get(p), 403, 'forbidden');
    }
  });
});

describe('bearer token failures', () => {
  test('no token: 401 with WWW-Authenticate: Bearer and code unauthorized', async () => {
    const res = await jsonApi(t, undefined).get(ORGS);
    assertJsonApiError(res, 401, 'unauthorized');
    assert.equal(res.headers.get('www-authenticate'), 'Bearer');
  });

  test('a non-Bearer Authorization header: 401', async () => {
    const res = await jsonApi(t, undefined).get(ORGS, {
      authorization: `Basic ${Buffer.from(`${tenant.clientId}:${tenant.clientSecret}`).toString('base64')}`,
    });
    assertJsonApiError(res, 401, 'unauthorized');
    assert.match(res.headers.get('www-authenticate') ?? '', /^Bearer/);
    assert.ok(!res.text.includes(tenant.clientSecret));
  });

  test('a garbage token: 401 invalid_token', async () => {
    assertInvalidToken(await jsonApi(t, 'garbage').get(ORGS));
    assertInvalidToken(await jsonApi(t, 'tbat_garbage.garbage').get(ORGS));
  });

  test('a token with a flipped signature character: 401 invalid_token', async () => {
    const token = await tokenFor(t, tenant);
    assert.equal((await jsonApi(t, token).get(ORGS)).status, 200);
    const dot = token.lastIndexOf('.');
    // The first signature character carries 6 significant bits (the last one only 4).
    const c = token[dot + 1]!;
    const flipped = `${token.slice(0, dot + 1)}${c === 'A' ? 'B' : 'A'}${token.slice(dot + 2)}`;
    assert.notEqual(flipped, token);
    assertInvalidToken(await jsonApi(t, flipped).get(ORGS));
  });

  test('a token with altered claims (later expiry) under its old signature: 401', async () => {
    const token = await tokenFor(t, tenant);
    const dot = token.lastIndexOf('.');
    const claims = JSON.parse(Buffer.from(token.slice('tbat_'.length, dot), 'base64url').toString('utf8'));
    const forged = `tbat_${Buffer.from(JSON.stringify({ ...claims, exp: claims.exp + 86_400 })).toString('base64url')}${token.slice(dot)}`;
    assertInvalidToken(await jsonApi(t, forged).get(ORGS));
  });

  test('an expired token: 401 invalid_token, exactly at exp', async () => {
    const realClock = t.deps.clock;
    // On a whole second, so that the token's exp (in seconds) falls exactly 900 s later.
    const frozen = Math.floor(realClock() / 1000) * 1000;
    try {
      t.deps.clock = () => frozen;
      const token = await tokenFor(t, tenant);
      const api = jsonApi(t, token);
      t.deps.clock = () => frozen + 899_999;
      assert.equal((await api.get(ORGS)).status, 200);
      t.deps.clock = () => frozen + 900_000;
      assertInvalidToken(await api.get(ORGS));
      t.deps.clock = () => Date.now() + 10_000_000;
      assertInvalidToken(await api.get(ORGS));
    } finally {
      t.deps.clock = realClock;
    }
  });
});

describe('role of the run-as member', () => {
  test('a member sees only its own credential; an admin sees both', async () => {
    const owner = await seedTenant(t.deps, { role: 'admin', scopes: ['api_read'] });
    const member = await seedAccount(t.deps, owner, { role: 'member', scopes: ['api_read'] });

    const asMember = jsonApi(t, await tokenFor(t, member));
    const memberList = await asMember.get('/api/json/v1/credentials');
    assert.equal(memberList.status, 200, memberList.text);
    assert.deepEqual(
      memberList.body.data.map((c: any) => c.id),
      [member.credentialId],
    );
    assert.equal(memberList.body.data[0].type, 'credential');
    assert.equal(memberList.body.data[0].attributes.client_id, member.clientId);
    assert.equal((await asMember.get(`/api/json/v1/credentials/${member.credentialId}`)).status, 200);
    assertJsonApiError(await asMember.get(`/api/json/v1/credentials/${owner.credentialId}`), 404, 'not_found');

    const asAdmin = jsonApi(t, await tokenFor(t, owner));
    const adminList = await asAdmin.get('/api/json/v1/credentials');
    assert.equal(adminList.status, 200, adminList.text);
    assert.deepEqual(adminList.body.data.map((c: any) => c.id).sort(), [owner.credentialId, member.credentialId].sort());
    assert.equal((await asAdmin.get(`/api/json/v1/credentials/${member.credentialId}`)).status, 200);
    for (const c of adminList.body.data) {
      assert.equal(c.attributes.secret_hash, undefined);
      assert.equal(c.attributes.client_secret, undefined);
    }
  });

  test('a credential of another organization is 404 even for an admin', async () => {
    const adminTenant = await seedTenant(t.deps, { role: 'admin', scopes: ['api_read'] });
    const api = jsonApi(t, await tokenFor(t, adminTenant));
    assertJsonApiError(await api.get(`/api/json/v1/credentials/${tenant.credentialId}`), 404, 'not_found');
  });
});
