/**
 * PGlite in its worker thread (src/db/pglite-thread.ts): a long statement does not hold the
 * server's event loop, PGlite's transactions and errors arrive as they would in-thread, a
 * lost worker fails queries instead of hanging them, and destroy lets the process exit.
 * PGlite only: on PostgreSQL there is no worker.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Kysely, PGliteDialect, sql } from 'kysely';
import { ENGINE, startApp, type TestApp } from '../helpers/app.ts';
import { pgliteTemplate } from '../helpers/databases.ts';
import { PgliteThread } from '../../src/db/pglite-thread.ts';
import { fromPgError, AppError } from '../../src/errors.ts';

const skip = ENGINE !== 'pglite' ? 'PGlite only' : false;
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

let t: TestApp;
before(async () => {
  if (!skip) t = await startApp();
});
after(async () => {
  await t?.close();
});

test('while a long statement runs, /healthz is answered over a socket before it ends', { skip }, async () => {
  let statementDone = false;
  // pg_sleep holds PGlite's thread for its whole length, as a long statement would; long
  // enough that a loaded machine still sends and answers the request inside it.
  const long = sql`select pg_sleep(8)`.execute(t.deps.db).then(() => (statementDone = true));
  const res = await fetch(`${t.url}/healthz`);
  assert.equal(res.status, 200);
  assert.deepEqual(await res.json(), { status: 'ok' });
  const answeredDuring = !statementDone;
  await long;
  assert.ok(answeredDuring, '/healthz was answered only after the statement ended');
});

test("a transaction's rollback and commit, and an error's fields, arrive as PGlite gives them", { skip }, async () => {
  const db = t.deps.db as unknown as Kysely<any>;
  await sql`create table thread_probe (id int primary key, note text constraint thread_probe_note check (note <> 'bad'))`.execute(db);
  await assert.rejects(
    db.transaction().execute(async (trx) => {
      await sql`insert into thread_probe values (1, 'a')`.execute(trx);
      throw new Error('changed my mind');
    }),
    /changed my mind/,
  );
  assert.deepEqual((await sql<{ n: number }>`select count(*)::int as n from thread_probe`.execute(db)).rows, [{ n: 0 }]);
  await db.transaction().execute(async (trx) => {
    await sql`insert into thread_probe values (1, 'a')`.execute(trx);
    await sql`insert into thread_probe values (2, 'b')`.execute(trx);
  });
  assert.deepEqual((await sql<{ n: number }>`select count(*)::int as n from thread_probe`.execute(db)).rows, [{ n: 2 }]);

  const unique = await sql`insert into thread_probe values (1, 'c')`.execute(db).then(
    () => assert.fail('a duplicate key was accepted'),
    (err: unknown) => err,
  );
  assert.ok(unique instanceof Error);
  assert.deepEqual(pick(unique), {
    code: '23505',
    constraint: 'thread_probe_pkey',
    table: 'thread_probe',
    schema: 'public',
    severity: 'ERROR',
    detail: 'Key (id)=(1) already exists.',
  });
  const check = await sql`insert into thread_probe values (3, 'bad')`.execute(db).then(
    () => assert.fail('the check was not enforced'),
    (err: unknown) => err,
  );
  assert.equal((check as { code?: string }).code, '23514');
  assert.equal((check as { constraint?: string }).constraint, 'thread_probe_note');
  // The same translation as before the worker: a constraint known by name points at its field.
  const translated = fromPgError(check, { thread_probe_note: ['/data/attributes/note', 'note must not be bad'] });
  assert.ok(translated instanceof AppError && translated.code === 'invalid_request');

  // A statement failing inside a transaction: the transaction is rolled back whole.
  await assert.rejects(
    db.transaction().execute(async (trx) => {
      await sql`insert into thread_probe values (4, 'd')`.execute(trx);
      await sql`insert into thread_probe values (1, 'e')`.execute(trx);
    }),
    { code: '23505' },
  );
  assert.deepEqual((await sql<{ n: number }>`select count(*)::int as n from thread_probe`.execute(db)).rows, [{ n: 2 }]);
  await sql`drop table thread_probe`.execute(db);
});

test("the bulk lane's statements wait for a request's next statement, and go when none waits", { skip }, async () => {
  const thread = new PgliteThread({ initialDump: await pgliteTemplate() });
  const db = new Kysely<any>({ dialect: new PGliteDialect({ pglite: thread }) });
  const bulk = new Kysely<any>({ dialect: new PGliteDialect({ pglite: thread.bulk() as unknown as PgliteThread }) });
  try {
    await sql`create table lane_probe (seq serial primary key, who text not null)`.execute(db);
    // A request's two statements, the second sent from the first's answer; a bulk statement
    // sent while the first runs. In arrival order the bulk one would run between them.
    const request = sql`select pg_sleep(0.2)`.execute(db).then(() => sql`insert into lane_probe (who) values ('request')`.execute(db));
    await new Promise((resolve) => setImmediate(resolve));
    const batch = sql`insert into lane_probe (who) values ('bulk')`.execute(bulk);
    await Promise.all([request, batch]);
    const order = (await sql<{ who: string }>`select who from lane_probe order by seq`.execute(db)).rows.map((r) => r.who);
    assert.deepEqual(order, ['request', 'bulk']);
    // With nothing else waiting, the bulk lane goes at once; its Kysely's destroy leaves the database open.
    await sql`insert into lane_probe (who) values ('bulk again')`.execute(bulk);
    await bulk.destroy();
    assert.equal((await sql<{ n: number }>`select count(*)::int as n from lane_probe`.execute(db)).rows[0]!.n, 3);
  } finally {
    await db.destroy();
  }
});

function pick(err: Error): Record<string, unknown> {
  const e = err as unknown as Record<string, unknown>;
  return Object.fromEntries(['code', 'constraint', 'table', 'schema', 'severity', 'detail'].map((k) => [k, e[k]]));
}

test('a worker that ends fails the query in flight and every later one as the database being unavailable', { skip }, async () => {
  const pglite = new PgliteThread({ initialDump: await pgliteTemplate() });
  const db = new Kysely<any>({ dialect: new PGliteDialect({ pglite }) });
  assert.deepEqual((await sql<{ one: number }>`select 1 as one`.execute(db)).rows, [{ one: 1 }]);
  const inFlight = sql`select pg_sleep(30)`.execute(db).then(
    () => assert.fail('the statement finished though its worker ended'),
    (err: unknown) => err,
  );
  // A turn of the event loop: the sleep has been posted to the worker (Kysely's way there is
  // promise callbacks only), so it is a call waiting on the worker when the worker ends.
  await new Promise((resolve) => setImmediate(resolve));
  await pglite.terminate();
  const err = await inFlight;
  assert.equal((err as { code?: string }).code, '08006');
  const translated = fromPgError(err);
  assert.ok(translated instanceof AppError && translated.code === 'unavailable', String(err));
  await assert.rejects(sql`select 1`.execute(db), { code: '08006' });
  await db.destroy();
});

/** Runs test/db/pglite-exit-child.ts in a child process; resolves with its exit code and output. */
function runChild(mode: 'destroy' | 'forget'): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(ROOT, 'test/db/pglite-exit-child.ts'), mode], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    // Only a guard against a hang failing the whole file: the assertion is that it exits.
    const guard = setTimeout(() => child.kill('SIGKILL'), 120_000);
    child.on('error', reject);
    child.on('exit', (exitCode) => {
      clearTimeout(guard);
      resolve({ code: exitCode, out });
    });
  });
}

test('db.destroy() ends the worker so the process exits; so does a script that never destroys', { skip }, async () => {
  for (const mode of ['destroy', 'forget'] as const) {
    const { code, out } = await runChild(mode);
    assert.equal(code, 0, `${mode}: ${out}`);
    assert.match(out, /^42$/m, mode);
  }
});
