import { ADVISORY_LOCK } from '../../src/db/advisory-locks.ts';
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { sql } from 'kysely';
import { adminCall, ENGINE, seedTenant, startApp, type Tenant, type TestApp } from '../helpers/app.ts';
import { writeFacts, type FactScope } from '../../src/facts/write.ts';
import { sweepFactRetention } from '../../src/facts/retention.ts';
import { sweep, sweepExclusive } from '../../src/maintenance/sweep.ts';
import { sweepOnce } from '../../src/maintenance/scheduler.ts';
import { createModel, daysAgo, factCount, recomputedCurrent, sleep, storedCurrent, type TestModel } from './helpers.ts';

let t: TestApp;
let tenant: Tenant;
let other: Tenant;
let scope: FactScope;

before(async () => {
  t = await startApp();
  tenant = await seedTenant(t.deps);
  other = await seedTenant(t.deps);
  scope = { organizationId: tenant.organizationId, workspaceId: tenant.workspaceId };
});
after(async () => {
  await t.close();
});

const scopeOf = (x: Tenant): FactScope => ({ organizationId: x.organizationId, workspaceId: x.workspaceId });
const PK = [
  { name: 'k', type: 'string' as const, is_primary_key: true },
  { name: 'v', type: 'integer' as const },
];

async function write(m: TestModel, s: FactScope, k: string | null, observedAt: string, v: number): Promise<string> {
  const r = await writeFacts(t.deps.db, s, m, [{ observed_at: observedAt, data: k === null ? { v } : { k, v } }]);
  assert.equal(r.written, 1);
  // Separate transactions a few ms apart: distinct inserted_at, in the order written.
  await sleep(3);
  return r.ids[0]!;
}

async function current(m: TestModel, axis: string, key: string): Promise<string | undefined> {
  return (await storedCurrent(t.deps.db, m.id)).find((r) => r.axis === axis && r.entity_key === key)?.fact_id;
}

async function assertConsistent(m: TestModel): Promise<void> {
  assert.deepEqual(await storedCurrent(t.deps.db, m.id), await recomputedCurrent(t.deps.db, m.id));
}

test('facts past retention_days are deleted and fact_current is repaired on both axes', async () => {
  const m = await createModel(t.deps.db, tenant, PK, { retentionDays: 30 });
  const untouched = await createModel(t.deps.db, tenant, PK);
  const longer = await createModel(t.deps.db, other, PK, { retentionDays: 60 });

  // recent: an old fact and a newer one; the newer is current on both axes and stays.
  await write(m, scope, 'recent', daysAgo(40), 1);
  const recentNew = await write(m, scope, 'recent', daysAgo(5), 2);
  // backfill: the old fact was inserted last, so it is current on the inserted_at axis only.
  const backfillNew = await write(m, scope, 'backfill', daysAgo(3), 1);
  const backfillOld = await write(m, scope, 'backfill', daysAgo(45), 2);
  // allold: every fact is outside the window, so the entity leaves fact_current.
  await write(m, scope, 'allold', daysAgo(50), 1);
  await write(m, scope, 'allold', daysAgo(31), 2);
  // null entity ids: each its own entity, gone with its fact.
  const nullOld = await write(m, scope, null, daysAgo(90), 1);
  const nullNew = await write(m, scope, null, daysAgo(1), 2);
  // just inside the window (by an hour).
  const edge = await write(m, scope, 'edge', daysAgo(30, 3_600_000), 1);

  const keptOld = await write(untouched, scope, 'x', daysAgo(400), 1);
  const within60 = await write(longer, scopeOf(other), 'y', daysAgo(40), 1);
  await write(longer, scopeOf(other), 'z', daysAgo(70), 1);

  assert.equal(await current(m, 'inserted_at', 'backfill'), backfillOld);
  assert.equal(await current(m, 'observed_at', 'backfill'), backfillNew);

  // A small batch, so the repair also runs across batch boundaries.
  const deleted = await sweepFactRetention(t.deps.db, { now: new Date(), batch: 2 });
  assert.equal(deleted, 5 + 1);

  assert.equal(await current(m, 'observed_at', 'recent'), recentNew);
  assert.equal(await current(m, 'inserted_at', 'recent'), recentNew);
  assert.equal(await current(m, 'observed_at', 'backfill'), backfillNew);
  assert.equal(await current(m, 'inserted_at', 'backfill'), backfillNew, 'moved to the latest remaining fact');
  assert.equal(await current(m, 'observed_at', 'allold'), undefined);
  assert.equal(await current(m, 'inserted_at', 'allold'), undefined);
  assert.equal(await current(m, 'observed_at', `#${nullOld}`), undefined);
  assert.equal(await current(m, 'inserted_at', `#${nullOld}`), undefined);
  assert.equal(await current(m, 'observed_at', `#${nullNew}`), nullNew);
  assert.equal(await current(m, 'observed_at', 'edge'), edge);
  assert.equal(await factCount(t.deps.db, m.id), 4);
  await assertConsistent(m);

  // A model without retention, and another workspace's longer window, keep their facts.
  assert.equal(await current(untouched, 'observed_at', 'x'), keptOld);
  assert.equal(await factCount(t.deps.db, untouched.id), 1);
  assert.equal(await factCount(t.deps.db, longer.id), 1);
  assert.equal(await current(longer, 'observed_at', 'y'), within60);
  assert.equal(await current(longer, 'observed_at', 'z'), undefined);
  await assertConsistent(untouched);
  await assertConsistent(longer);

  assert.equal(await sweepFactRetention(t.deps.db, { now: new Date() }), 0, 'a second sweep finds nothing');
});

test('the sweep (admin API, and the scheduler under its lock) deletes expired facts and idempotency keys', async () => {
  const m = await createModel(t.deps.db, tenant, PK, { retentionDays: 7 });
  for (let i = 0; i < 12; i++) await write(m, scope, `e${i % 4}`, daysAgo(8 + i), i);
  const keep = await write(m, scope, 'e0', daysAgo(1), 99);
  const expiredKey = async (key: string) =>
    sql`insert into idempotency_keys (credential_id, key, fingerprint, state, status, body, locked_until, expires_at)
        values (${tenant.credentialId}, ${key}, 'fp', 'done', 201, '{}', now() - interval '2 days', now() - interval '1 day')`.execute(t.deps.db);
  await expiredKey('old-key-1');
  await sql`insert into idempotency_keys (credential_id, key, fingerprint, state, status, body, locked_until, expires_at)
            values (${tenant.credentialId}, 'live-key', 'fp', 'done', 201, '{}', now(), now() + interval '1 day')`.execute(t.deps.db);

  const res = await adminCall(t, 'POST', '/sweep');
  assert.equal(res.status, 200);
  assert.equal(res.body.data.facts_deleted, 12);
  assert.ok(res.body.data.idempotency_keys_deleted >= 1);
  const keys = await t.deps.db.selectFrom('idempotency_keys').select('key').where('credential_id', '=', tenant.credentialId).execute();
  assert.deepEqual(
    keys.map((k) => k.key),
    ['live-key'],
  );
  assert.equal(await factCount(t.deps.db, m.id), 1);
  assert.equal(await current(m, 'observed_at', 'e0'), keep);
  assert.equal(await current(m, 'inserted_at', 'e1'), undefined);
  await assertConsistent(m);

  // The nightly path: one connection, a session lock, batches committed one by one.
  await write(m, scope, 'e5', daysAgo(10), 1);
  await expiredKey('old-key-2');
  assert.equal(await sweepOnce(t.deps), true);
  assert.equal(await factCount(t.deps.db, m.id), 1);
  await assertConsistent(m);
  const direct = await sweep(t.deps.db, { now: new Date(), guardDays: 7, runRetentionDays: 30 });
  assert.deepEqual(direct, { idempotency_keys_deleted: 0, facts_deleted: 0, delivery_guards_deleted: 0, workflow_runs_deleted: 0 });
});

test(
  'one sweep at a time: while another session holds the sweep lock, POST /sweep is 409 and the scheduler skips (postgres)',
  { skip: ENGINE === 'postgres' ? false : 'PGlite has one session, whose advisory locks are re-entrant' },
  async () => {
    const m = await createModel(t.deps.db, tenant, PK, { retentionDays: 7 });
    await write(m, scope, 'a', daysAgo(9), 1);
    await t.deps.db.connection().execute(async (conn) => {
      const { rows } = await sql<{ locked: boolean }>`select pg_try_advisory_lock(${ADVISORY_LOCK.sweep}) as locked`.execute(conn);
      assert.equal(rows[0]!.locked, true);
      try {
        const busy = await adminCall(t, 'POST', '/sweep');
        assert.equal(busy.status, 409, busy.text);
        assert.equal(busy.body.errors[0].code, 'conflict');
        assert.equal(await sweepOnce(t.deps), false);
        assert.equal(await factCount(t.deps.db, m.id), 1);
      } finally {
        await sql`select pg_advisory_unlock(${ADVISORY_LOCK.sweep})`.execute(conn);
      }
    });
    const done = await adminCall(t, 'POST', '/sweep');
    assert.equal(done.status, 200, done.text);
    assert.equal(await factCount(t.deps.db, m.id), 0);
  },
);

test('sweeps asked for at once: each is done or refused with 409, and fact_current stays right', async () => {
  const m = await createModel(t.deps.db, tenant, PK, { retentionDays: 7 });
  // Per entity a fact within the window, written first, then 20 expired ones out of
  // observed order: each entity's inserted_at row moves from fact to fact as they go.
  const kept = Array.from({ length: 40 }, (_, i) => ({ observed_at: daysAgo(1, i), data: { k: `e${i}`, v: 0 } }));
  assert.equal((await writeFacts(t.deps.db, scope, m, kept)).written, 40);
  const expired = Array.from({ length: 20 }, (_, j) =>
    kept.map((_, i) => ({ observed_at: daysAgo(20 + ((i * 7 + j * 13) % 30), j), data: { k: `e${i}`, v: j + 1 } })),
  ).flat();
  assert.equal((await writeFacts(t.deps.db, scope, m, expired)).written, 800);
  // Small batches, so that unlocked sweeps would overlap for many batches.
  const results = await Promise.all([
    ...Array.from({ length: 6 }, () => sweepExclusive(t.deps.db, { now: new Date(), factBatch: 10, guardDays: 7, runRetentionDays: 30 })),
    adminCall(t, 'POST', '/sweep'),
  ]);
  const answer = results.pop() as Awaited<ReturnType<typeof adminCall>>;
  assert.ok(answer.status === 200 || answer.status === 409, `${answer.status} ${answer.text}`);
  assert.ok(results.some((r) => r !== undefined));
  assert.equal(await factCount(t.deps.db, m.id), 40);
  await assertConsistent(m);
});
