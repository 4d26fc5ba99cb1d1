/**
 * Idempotency-Key on JSON:API writes (contract: Common rules, Errors, Limits; decisions §3):
 * scoped per service account, fingerprinted by method, path, query and canonical body,
 * replayed byte for byte, and swept after its retention window.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { up as sealStoredAnswers } from '../../src/db/migrations/0016_sealed_idempotency_answers.ts';
import { canonicalJson } from '../../src/json.ts';
import { openAnswer } from '../../src/secret-box.ts';
import { JSONAPI, dataModelDoc, jsonApi, seedAccount, seedTenant, startApp, tokenFor, type ApiResponse, type Tenant, type TestApp } from '../helpers/app.ts';
import { sweep } from '../../src/maintenance/sweep.ts';

const MODELS = '/api/json/v1/data_models';
const FIELDS = '/api/json/v1/data_model_fields';

type Api = ReturnType<typeof jsonApi>;

let t: TestApp;
let tenant: Tenant;
let api: Api;

before(async () => {
  t = await startApp({ RATE_LIMIT_MAX: '1000000' });
  tenant = await seedTenant(t.deps);
  api = jsonApi(t, await tokenFor(t, tenant));
});

after(async () => {
  await t?.close();
});

function assertError(res: ApiResponse, status: number, code: string, what: string): void {
  assert.equal(res.status, status, `${what}: status (body ${res.text.slice(0, 300)})`);
  assert.equal(res.headers.get('content-type'), JSONAPI, `${what}: content-type`);
  assert.ok(Array.isArray(res.body?.errors) && res.body.errors.length === 1, `${what}: errors array`);
  const e = res.body.errors[0];
  assert.equal(e.status, String(status), `${what}: errors[0].status`);
  assert.equal(e.code, code, `${what}: errors[0].code`);
  assert.equal(typeof e.title, 'string');
  assert.equal(typeof e.detail, 'string');
  assert.doesNotMatch(res.text, /node_modules|\/work\/|\n\s+at\s|\binsert into\b|\bselect\b.*\bfrom\b/i, `${what}: leak`);
}

const key = () => `k-${randomUUID()}`;
const replayed = (res: ApiResponse) => res.headers.get('idempotent-replayed');

async function modelsWithSlug(slug: string, workspaceId = tenant.workspaceId) {
  return t.deps.db.selectFrom('data_models').select(['id', 'name']).where('workspace_id', '=', workspaceId).where('slug', '=', slug).execute();
}

async function keyRow(credentialId: string, k: string) {
  return t.deps.db.selectFrom('idempotency_keys').selectAll().where('credential_id', '=', credentialId).where('key', '=', k).executeTakeFirst();
}

describe('replay', () => {
  test('a POST with Idempotency-Key creates once; the same request replays status and body byte for byte', async () => {
    const k = key();
    const doc = dataModelDoc({ name: 'Replay', slug: 'replay', retention_days: 7 });
    const first = await api.post(MODELS, doc, { 'idempotency-key': k });
    assert.equal(first.status, 201, first.text);
    assert.equal(replayed(first), null, 'the original response is not marked as a replay');
    assert.equal(first.body.data.attributes.slug, 'replay');

    for (let i = 0; i < 3; i++) {
      const again = await api.post(MODELS, doc, { 'idempotency-key': k });
      assert.equal(again.status, 201);
      assert.equal(again.text, first.text, 'the replayed body is byte-identical');
      assert.equal(replayed(again), 'true');
      assert.ok(first.headers.get('location'));
      assert.equal(again.headers.get('location'), first.headers.get('location'), 'a replayed 201 names what it created, as the first did');
      assert.equal(again.headers.get('content-type'), JSONAPI);
      assert.ok(again.headers.get('x-request-id'));
    }
    // Semantically equal bodies (other member order, other whitespace) fingerprint alike.
    const reordered = `{ "data": { "attributes": { "retention_days": 7, "slug": "replay", "name": "Replay" }, "type": "data_model" } }`;
    const again = await api.post(MODELS, reordered, { 'idempotency-key': k });
    assert.equal(again.status, 201);
    assert.equal(again.text, first.text);
    assert.equal(replayed(again), 'true');

    const rows = await modelsWithSlug('replay');
    assert.deepEqual(
      rows.map((r) => r.id),
      [first.body.data.id],
      'no second resource',
    );
    const row = await keyRow(tenant.credentialId, k);
    assert.equal(row?.state, 'done');
    assert.equal(row?.status, 201);
    assert.notEqual(row?.body, first.text, 'the answer is not kept in plain text');
    assert.equal(openAnswer(t.deps.connectorKey, tenant.credentialId, k, row!.body!), first.text);
  });

  test('without Idempotency-Key the same request runs again', async () => {
    const doc = dataModelDoc({ name: 'No key', slug: 'no-key' });
    assert.equal((await api.post(MODELS, doc)).status, 201);
    const second = await api.post(MODELS, doc);
    assertError(second, 422, 'invalid_request', 'second create without a key');
    assert.equal(replayed(second), null);
  });

  test('a 4xx result is stored and replayed too', async () => {
    const k = key();
    const doc = dataModelDoc({ name: 'Bad slug', slug: 'Not A Slug' });
    const first = await api.post(MODELS, doc, { 'idempotency-key': k });
    assertError(first, 422, 'invalid_request', 'invalid slug');
    assert.equal(first.body.errors[0].source.pointer, '/data/attributes/slug');
    assert.equal(replayed(first), null);
    const again = await api.post(MODELS, doc, { 'idempotency-key': k });
    assert.equal(again.status, 422);
    assert.equal(again.text, first.text);
    assert.equal(replayed(again), 'true');
    assert.equal(again.headers.get('content-type'), JSONAPI);
    const row = await keyRow(tenant.credentialId, k);
    assert.equal(row?.status, 422);
    assert.equal((await modelsWithSlug('Not A Slug')).length, 0);

    // A 409 type_mismatch from the handler is stored as well.
    const k2 = key();
    const wrongType = { data: { type: 'data_model_field', attributes: { name: 'x', slug: 'x' } } };
    const tm = await api.post(MODELS, wrongType, { 'idempotency-key': k2 });
    assertError(tm, 409, 'type_mismatch', 'wrong type');
    const tm2 = await api.post(MODELS, wrongType, { 'idempotency-key': k2 });
    assert.equal(tm2.status, 409);
    assert.equal(tm2.text, tm.text);
    assert.equal(replayed(tm2), 'true');
  });

  test('a PATCH with Idempotency-Key replays the stored response, not the current state', async () => {
    const created = await api.post(MODELS, dataModelDoc({ name: 'Before', slug: 'patch-replay' }));
    assert.equal(created.status, 201);
    const id = created.body.data.id;
    const k = key();
    const doc = { data: { type: 'data_model', id, attributes: { name: 'After' } } };
    const first = await api.patch(`${MODELS}/${id}`, doc, { 'idempotency-key': k });
    assert.equal(first.status, 200, first.text);
    assert.equal(first.body.data.attributes.name, 'After');
    assert.equal(replayed(first), null);

    // Someone else renames it; the replay still shows what the keyed request answered.
    const other = await api.patch(`${MODELS}/${id}`, { data: { type: 'data_model', id, attributes: { name: 'Later' } } });
    assert.equal(other.status, 200);
    const again = await api.patch(`${MODELS}/${id}`, doc, { 'idempotency-key': k });
    assert.equal(again.status, 200);
    assert.equal(again.text, first.text);
    assert.equal(replayed(again), 'true');
    const rows = await modelsWithSlug('patch-replay');
    assert.deepEqual(
      rows.map((r) => r.name),
      ['Later'],
      'the replay did not run the PATCH again',
    );
  });
});

describe('fingerprint', () => {
  test('the same key with a different body is 409 idempotency_key_reused', async () => {
    const k = key();
    const first = await api.post(MODELS, dataModelDoc({ name: 'Fp', slug: 'fp-one' }), { 'idempotency-key': k });
    assert.equal(first.status, 201);
    for (const doc of [
      dataModelDoc({ name: 'Fp', slug: 'fp-two' }),
      dataModelDoc({ name: 'Fp ', slug: 'fp-one' }),
      dataModelDoc({ name: 'Fp', slug: 'fp-one', description: null }),
    ]) {
      const res = await api.post(MODELS, doc, { 'idempotency-key': k });
      assertError(res, 409, 'idempotency_key_reused', `different body ${JSON.stringify(doc)}`);
      assert.equal(res.body.errors[0].source?.header, 'Idempotency-Key');
      assert.equal(replayed(res), null);
    }
    assert.equal((await modelsWithSlug('fp-two')).length, 0);
    // The stored response is intact: the original request still replays.
    const again = await api.post(MODELS, dataModelDoc({ name: 'Fp', slug: 'fp-one' }), { 'idempotency-key': k });
    assert.equal(again.text, first.text);
  });

  test('the same key and body on another path, query or method is 409 idempotency_key_reused', async () => {
    const k = key();
    const doc = dataModelDoc({ name: 'Path', slug: 'fp-path' });
    const first = await api.post(MODELS, doc, { 'idempotency-key': k });
    assert.equal(first.status, 201);
    const id = first.body.data.id;
    const cases: Array<[string, string, unknown]> = [
      ['POST', FIELDS, doc],
      ['POST', `${MODELS}?include=fields`, doc],
      ['POST', `${MODELS}?fields[data_model]=name`, doc],
      ['PATCH', `${MODELS}/${id}`, doc],
    ];
    for (const [method, path, body] of cases) {
      const res = await api.request(method, path, body, { 'idempotency-key': k });
      assertError(res, 409, 'idempotency_key_reused', `${method} ${path}`);
    }
    assert.equal((await modelsWithSlug('fp-path')).length, 1);
  });

  test('keys are scoped per service account', async () => {
    const k = key();
    const doc = dataModelDoc({ name: 'Scoped', slug: 'scoped' });
    const first = await api.post(MODELS, doc, { 'idempotency-key': k });
    assert.equal(first.status, 201);

    // Another account of the same workspace uses the same key for its own request.
    const colleague = await seedAccount(t.deps, tenant);
    const capi = jsonApi(t, await tokenFor(t, colleague));
    const theirs = await capi.post(MODELS, dataModelDoc({ name: 'Theirs', slug: 'scoped-theirs' }), { 'idempotency-key': k });
    assert.equal(theirs.status, 201, theirs.text);
    assert.equal(replayed(theirs), null);
    assert.equal(theirs.body.data.attributes.slug, 'scoped-theirs');
    // The same key and body from a third account is not a replay of the first account's
    // response: it runs, and finds the slug taken in this organization.
    const third = jsonApi(t, await tokenFor(t, await seedAccount(t.deps, tenant)));
    const same = await third.post(MODELS, doc, { 'idempotency-key': k });
    assertError(same, 422, 'invalid_request', 'third account repeats key and body');
    assert.equal(replayed(same), null);

    // An account of another organization sends the identical request with the identical key.
    const stranger = await seedTenant(t.deps);
    const sapi = jsonApi(t, await tokenFor(t, stranger));
    const strangers = await sapi.post(MODELS, doc, { 'idempotency-key': k });
    assert.equal(strangers.status, 201, strangers.text);
    assert.equal(replayed(strangers), null);
    assert.notEqual(strangers.body.data.id, first.body.data.id);
    assert.equal(strangers.body.data.attributes.organization_id, stranger.organizationId);
    assert.equal((await modelsWithSlug('scoped', stranger.workspaceId)).length, 1);
    assert.equal((await modelsWithSlug('scoped')).length, 1);

    // Each account's stored response replays only to that account.
    const mine = await api.post(MODELS, doc, { 'idempotency-key': k });
    assert.equal(mine.text, first.text);
    const theirsAgain = await capi.post(MODELS, dataModelDoc({ name: 'Theirs', slug: 'scoped-theirs' }), { 'idempotency-key': k });
    assert.equal(theirsAgain.text, theirs.text);
  });
});

describe('key rules', () => {
  test('empty, 256 characters, non-ASCII and tab characters are 400 bad_request', async () => {
    const bad = ['', 'x'.repeat(256), 'clé', 'ключ', 'tab\there'];
    for (const [i, k] of bad.entries()) {
      const slug = `bad-key-${i}`;
      let res: ApiResponse;
      try {
        res = await api.post(MODELS, dataModelDoc({ name: 'Bad key', slug }), { 'idempotency-key': k });
      } catch {
        // fetch refuses characters beyond Latin-1 in a header value: send the raw bytes instead.
        res = await rawPost(MODELS, JSON.stringify(dataModelDoc({ name: 'Bad key', slug })), Buffer.from(k, 'utf8').toString('latin1'));
      }
      assertError(res, 400, 'bad_request', `key ${JSON.stringify(k)}`);
      assert.equal(res.body.errors[0].source?.header, 'Idempotency-Key');
      assert.equal((await modelsWithSlug(slug)).length, 0, `key ${JSON.stringify(k)} wrote nothing`);
    }
  });

  test('1 and 255 printable ASCII characters are accepted', async () => {
    for (const [i, k] of ['~', `${'x '.repeat(127)}!`, `${'a'.repeat(254)}z`].entries()) {
      const doc = dataModelDoc({ name: 'Good key', slug: `good-key-${i}` });
      const res = await api.post(MODELS, doc, { 'idempotency-key': k });
      assert.equal(res.status, 201, `key of ${k.length}: ${res.text}`);
      const again = await api.post(MODELS, doc, { 'idempotency-key': k });
      assert.equal(again.text, res.text);
      assert.equal(replayed(again), 'true');
    }
  });
});

/** A POST over node:http, for header bytes fetch will not send. */
async function rawPost(path: string, body: string, idempotencyKey: string): Promise<ApiResponse> {
  const http = await import('node:http');
  const token = await tokenFor(t, tenant);
  return new Promise((resolve, reject) => {
    const req = http.request(
      `${t.url}${path}`,
      { method: 'POST', headers: { authorization: `Bearer ${token}`, accept: JSONAPI, 'content-type': JSONAPI, 'idempotency-key': idempotencyKey } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          const headers = new Headers();
          for (const [k, v] of Object.entries(res.headers)) if (typeof v === 'string') headers.set(k, v);
          resolve({ status: res.statusCode ?? 0, headers, text, body: text ? JSON.parse(text) : undefined });
        });
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

describe('concurrency', () => {
  test('50 concurrent POSTs with one key and one body create exactly one data model', async () => {
    const k = key();
    const doc = dataModelDoc({ name: 'Race', slug: 'race' });
    const results = await Promise.all(Array.from({ length: 50 }, () => api.post(MODELS, doc, { 'idempotency-key': k })));
    const created = results.filter((r) => r.status === 201);
    const inFlight = results.filter((r) => r.status === 409);
    assert.equal(created.length + inFlight.length, 50, `statuses: ${results.map((r) => r.status).join(',')}`);
    const originals = created.filter((r) => replayed(r) === null);
    assert.equal(originals.length, 1, 'exactly one response is the original');
    for (const r of created) assert.equal(r.text, originals[0]!.text, 'every 201 carries the identical body');
    for (const r of created) if (r !== originals[0]) assert.equal(replayed(r), 'true');
    for (const r of inFlight) {
      assertError(r, 409, 'idempotency_key_in_flight', 'concurrent duplicate');
      assert.equal(r.headers.get('retry-after'), '1');
    }
    const rows = await modelsWithSlug('race');
    assert.deepEqual(
      rows.map((r) => r.id),
      [originals[0]!.body.data.id],
    );
    // Once the first finished, the key replays.
    const later = await api.post(MODELS, doc, { 'idempotency-key': k });
    assert.equal(later.text, originals[0]!.text);
    assert.equal(replayed(later), 'true');
  });

  test('a request while the first is in flight is 409 idempotency_key_in_flight; an abandoned claim is taken over', async () => {
    const k = key();
    const doc = dataModelDoc({ name: 'Lease', slug: 'lease' });
    const first = await api.post(MODELS, doc, { 'idempotency-key': k });
    assert.equal(first.status, 201);
    // Put the key back into the state of a request that is still running.
    await t.deps.db
      .updateTable('idempotency_keys')
      .set({ state: 'in_flight', status: null, body: null, locked_until: sql<Date>`now() + interval '1 minute'` })
      .where('credential_id', '=', tenant.credentialId)
      .where('key', '=', k)
      .execute();
    const busy = await api.post(MODELS, doc, { 'idempotency-key': k });
    assertError(busy, 409, 'idempotency_key_in_flight', 'in flight');
    assert.equal(busy.headers.get('retry-after'), '1');
    // Another body under the key is still a reuse, in flight or not.
    assertError(
      await api.post(MODELS, dataModelDoc({ name: 'Lease', slug: 'lease-2' }), { 'idempotency-key': k }),
      409,
      'idempotency_key_reused',
      'reuse while in flight',
    );

    // The holder crashed: its lease ran out, so the next request runs (and finds the slug taken).
    await t.deps.db
      .updateTable('idempotency_keys')
      .set({ locked_until: sql<Date>`now() - interval '1 second'` })
      .where('credential_id', '=', tenant.credentialId)
      .where('key', '=', k)
      .execute();
    const takeover = await api.post(MODELS, doc, { 'idempotency-key': k });
    assertError(takeover, 422, 'invalid_request', 'takeover runs the request');
    assert.equal(replayed(takeover), null);
    assert.equal((await modelsWithSlug('lease')).length, 1);
    const row = await keyRow(tenant.credentialId, k);
    assert.equal(row?.state, 'done');
    assert.equal(row?.status, 422);
  });
});

describe('retention', () => {
  test('an expired key may be used again with a new body', async () => {
    const k = key();
    const first = await api.post(MODELS, dataModelDoc({ name: 'Old', slug: 'expiry-old' }), { 'idempotency-key': k });
    assert.equal(first.status, 201);
    const stored = await keyRow(tenant.credentialId, k);
    const ttl = (new Date(stored!.expires_at as unknown as string).getTime() - new Date(stored!.inserted_at as unknown as string).getTime()) / 1000;
    assert.ok(Math.abs(ttl - 86_400) < 5, `the default retention is 24 hours (got ${ttl} s)`);

    // Still live: another body is a reuse.
    assertError(await api.post(MODELS, dataModelDoc({ name: 'New', slug: 'expiry-new' }), { 'idempotency-key': k }), 409, 'idempotency_key_reused', 'live key');

    await t.deps.db
      .updateTable('idempotency_keys')
      .set({ expires_at: sql<Date>`now() - interval '1 second'` })
      .where('credential_id', '=', tenant.credentialId)
      .where('key', '=', k)
      .execute();
    const reused = await api.post(MODELS, dataModelDoc({ name: 'New', slug: 'expiry-new' }), { 'idempotency-key': k });
    assert.equal(reused.status, 201, reused.text);
    assert.equal(replayed(reused), null);
    assert.equal(reused.body.data.attributes.slug, 'expiry-new');
    // The key now belongs to the new request.
    const again = await api.post(MODELS, dataModelDoc({ name: 'New', slug: 'expiry-new' }), { 'idempotency-key': k });
    assert.equal(again.text, reused.text);
    assert.equal(replayed(again), 'true');
    assertError(
      await api.post(MODELS, dataModelDoc({ name: 'Old', slug: 'expiry-old' }), { 'idempotency-key': k }),
      409,
      'idempotency_key_reused',
      'old body after reuse',
    );
  });

  test('the sweep deletes expired keys and keeps live ones', async () => {
    const expired = [key(), key(), key()];
    const live = [key(), key()];
    for (const [i, k] of [...expired, ...live].entries()) {
      const res = await api.post(MODELS, dataModelDoc({ name: 'Sweep', slug: `sweep-${i}` }), { 'idempotency-key': k });
      assert.equal(res.status, 201);
    }
    await t.deps.db
      .updateTable('idempotency_keys')
      .set({ expires_at: sql<Date>`now() - interval '1 hour'` })
      .where('credential_id', '=', tenant.credentialId)
      .where('key', 'in', expired)
      .execute();
    const due = await t.deps.db
      .selectFrom('idempotency_keys')
      .select(sql<number>`count(*)::int`.as('n'))
      .where('expires_at', '<=', sql<Date>`now()`)
      .executeTakeFirstOrThrow();
    assert.equal(due.n, expired.length);
    const total = await t.deps.db
      .selectFrom('idempotency_keys')
      .select(sql<number>`count(*)::int`.as('n'))
      .executeTakeFirstOrThrow();

    const result = await sweep(t.deps.db, { now: new Date(), guardDays: 7, runRetentionDays: 30 });
    assert.equal(result.idempotency_keys_deleted, expired.length);
    for (const k of expired) assert.equal(await keyRow(tenant.credentialId, k), undefined, 'expired key deleted');
    for (const k of live) assert.ok(await keyRow(tenant.credentialId, k), 'live key kept');
    const left = await t.deps.db
      .selectFrom('idempotency_keys')
      .select(sql<number>`count(*)::int`.as('n'))
      .executeTakeFirstOrThrow();
    assert.equal(left.n, total.n - expired.length);

    // A second sweep finds nothing; live keys still replay.
    assert.equal((await sweep(t.deps.db, { now: new Date(), guardDays: 7, runRetentionDays: 30 })).idempotency_keys_deleted, 0);
    const replay = await api.post(MODELS, dataModelDoc({ name: 'Sweep', slug: `sweep-${expired.length}` }), { 'idempotency-key': live[0]! });
    assert.equal(replay.status, 201);
    assert.equal(replayed(replay), 'true');
  });
});

describe('at rest', () => {
  /** Every column of every stored key of the tenant's account, as text. */
  async function storedText(): Promise<string> {
    const rows = await t.deps.db.selectFrom('idempotency_keys').selectAll().where('credential_id', '=', tenant.credentialId).execute();
    return JSON.stringify(rows);
  }

  test("a saved workflow's trigger token is not kept in the clear; the repeat answers identically", async () => {
    const k = key();
    const doc = {
      data: {
        type: 'workflow_builder_state',
        attributes: {
          is_new_version: false,
          organization_id: tenant.organizationId,
          wf_params: { name: 'Sealed', is_active: true },
          trigger_params: [{ key: 'hook', type: 'webhook', service_account_id: tenant.credentialId }],
          step_params: [{ key: 'shape', type: 'transform', config: { expression: 'payload' } }],
        },
      },
    };
    const first = await api.post('/api/json/v1/workflows/save_builder_state', doc, { 'idempotency-key': k });
    assert.equal(first.status, 201, first.text);
    const token: string = first.body.meta.trigger_tokens.hook;
    assert.ok(typeof token === 'string' && token.length >= 20, 'the answer shows the new trigger token once');

    const row = await keyRow(tenant.credentialId, k);
    assert.equal(row?.state, 'done');
    assert.match(row!.body!, /^v1\./, 'the stored answer is sealed');
    assert.match(row!.fingerprint, /^h1:[0-9a-f]{64}$/, 'the fingerprint is a keyed hash');
    assert.ok(!(await storedText()).includes(token), 'no trigger token in the idempotency table');
    // Not even in the whole table, as the database would dump it.
    const dump = await sql<{ t: string }>`select coalesce(string_agg(i::text, ''), '') as t from idempotency_keys i`.execute(t.deps.db);
    assert.ok(!dump.rows[0]!.t.includes(token));

    const again = await api.post('/api/json/v1/workflows/save_builder_state', doc, { 'idempotency-key': k });
    assert.equal(again.status, 201);
    assert.equal(again.text, first.text, 'the repeat is the same answer, token included');
    assert.equal(replayed(again), 'true');
    const workflows = await t.deps.db
      .selectFrom('workflows')
      .select('id')
      .where('workspace_id', '=', tenant.workspaceId)
      .where('name', '=', 'Sealed')
      .execute();
    assert.equal(workflows.length, 1, 'saved once');

    // The sealed answer opens only for its own account and key.
    assert.throws(() => openAnswer(t.deps.connectorKey, tenant.credentialId, `${k}x`, row!.body!));
    assert.throws(() => openAnswer(Buffer.alloc(32, 7), tenant.credentialId, k, row!.body!));
  });

  test("a connector's secret in a keyed request is kept neither in the clear nor as a plain hash of the body", async () => {
    const k = key();
    // Guessable (4 random hex digits) yet long enough for an inbound api_key connector (16 bytes).
    const secret = `weak-secret-${randomUUID().slice(0, 4)}`;
    const doc = { data: { type: 'external_connector', attributes: { name: `At rest ${k}`, auth_type: 'api_key', direction: 'inbound', secret } } };
    const first = await api.post('/api/json/v1/external_connectors', doc, { 'idempotency-key': k });
    assert.equal(first.status, 201, first.text);
    const row = await keyRow(tenant.credentialId, k);
    assert.ok(!(await storedText()).includes(secret));
    const plainDigest = createHash('sha256')
      .update(`POST\n/api/json/v1/external_connectors\n${canonicalJson(doc)}`)
      .digest('hex');
    assert.notEqual(row!.fingerprint, plainDigest, 'a guess of the secret cannot be checked against the stored fingerprint');
    const again = await api.post('/api/json/v1/external_connectors', doc, { 'idempotency-key': k });
    assert.equal(again.text, first.text);
    assert.equal(replayed(again), 'true');
  });

  /** Key `k` replays `first` to `doc` and refuses another body. */
  async function answersOnly(k: string, doc: unknown, first: ApiResponse, what: string): Promise<void> {
    const again = await api.post(MODELS, doc, { 'idempotency-key': k });
    assert.equal(again.status, first.status, what);
    assert.equal(again.text, first.text, what);
    assert.equal(replayed(again), 'true', what);
    const other = await api.post(MODELS, dataModelDoc({ name: 'Legacy', slug: 'legacy-other' }), { 'idempotency-key': k });
    assertError(other, 409, 'idempotency_key_reused', `another body under ${what}`);
  }

  test('a key stored in plain text before answers were sealed is still answered; migration 0016 seals it', async () => {
    const k = key();
    const doc = dataModelDoc({ name: 'Legacy', slug: 'legacy-plain' });
    const first = await api.post(MODELS, doc, { 'idempotency-key': k });
    assert.equal(first.status, 201, first.text);
    // The row as the earlier version stored it: the plain SHA-256 fingerprint and the answer as sent.
    const legacyFingerprint = createHash('sha256')
      .update(`POST\n${MODELS}\n${canonicalJson(doc)}`)
      .digest('hex');
    await t.deps.db
      .updateTable('idempotency_keys')
      .set({ fingerprint: legacyFingerprint, body: first.text })
      .where('credential_id', '=', tenant.credentialId)
      .where('key', '=', k)
      .execute();

    await answersOnly(k, doc, first, 'a plain-text key');

    await sealStoredAnswers(t.deps.db);
    const row = await keyRow(tenant.credentialId, k);
    assert.match(row!.body!, /^v1\./);
    assert.match(row!.fingerprint, /^h1:/);
    assert.equal(openAnswer(t.deps.connectorKey, tenant.credentialId, k, row!.body!), first.text);
    const plain = await t.deps.db
      .selectFrom('idempotency_keys')
      .select(sql<number>`count(*)::int`.as('n'))
      .where((eb) => eb.or([eb('fingerprint', 'not like', 'h1:%'), eb('body', 'not like', 'v1.%')]))
      .executeTakeFirstOrThrow();
    assert.equal(plain.n, 0, 'no row left in plain text');
    await answersOnly(k, doc, first, 'a key sealed by 0016');
  });
});
