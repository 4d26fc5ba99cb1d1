/**
 * /readyz of a busy process: with every pooled connection held by work, readiness still
 * answers at once (a recent successful query says the database answers), instead of queueing
 * its probe behind the work until a balancer's check gives up on a working process.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { sql } from 'kysely';
import { startApp, type TestApp } from '../helpers/app.ts';

let t: TestApp;
before(async () => {
  t = await startApp({ DATABASE_POOL_SIZE: '1' });
});
after(async () => {
  await t?.close();
});

test(
  'a process whose pool is all in use is ready without waiting for a connection',
  { skip: !process.env.DATABASE_URL && 'PostgreSQL only: PGlite has no pool' },
  async () => {
    const order: string[] = [];
    // The one connection is taken by a long statement, right after a query succeeded.
    await sql`select 1`.execute(t.deps.db);
    const busy = sql`select pg_sleep(5)`.execute(t.deps.db).then(() => order.push('work'));
    const ready = fetch(`${t.url}/readyz`).then(async (res) => {
      order.push('readyz');
      return { status: res.status, body: (await res.json()) as { status: string } };
    });
    const answer = await ready;
    await busy;
    assert.deepEqual(order, ['readyz', 'work'], 'readiness answered before the work let go of the connection');
    assert.equal(answer.status, 200);
    assert.equal(answer.body.status, 'ready');
  },
);

test('with no recent answer, readiness asks the database itself', async () => {
  // A failed statement clears the recent answer; the probe then runs and succeeds.
  await assert.rejects(sql`select * from no_such_table`.execute(t.deps.db));
  assert.equal(t.deps.databaseAnswered(), 0);
  const res = await fetch(`${t.url}/readyz`);
  assert.equal(res.status, 200);
  assert.equal(((await res.json()) as { status: string }).status, 'ready');
  assert.ok(t.deps.databaseAnswered() > 0, 'the probe itself was a query that answered');
});
