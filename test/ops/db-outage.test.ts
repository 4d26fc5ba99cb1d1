/**
 * PostgreSQL going away: the process survives sessions ended under it, every surface
 * answers 503 with Retry-After while the database cannot be reached (never 500), and the
 * service recovers by itself. The database is reached through a TCP proxy this file
 * controls, and only this file's own database has its backends terminated.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import pg from 'pg';
import { sql } from 'kysely';
import { AppError, fromPgError, isDatabaseUnavailable } from '../../src/errors.ts';
import { toAppError } from '../../src/http/render-error.ts';
import { tcpProxy } from '../helpers/tcp-proxy.ts';
import { capturingLogger, dataModelDoc, jsonApi, seedTenant, startApp, tokenFor, type Tenant, type TestApp } from '../helpers/app.ts';

test('errors without a SQLSTATE that mean the database is out of reach are database unavailability', () => {
  const unavailable = [
    new Error('Connection terminated unexpectedly'),
    new Error('Connection terminated'),
    new Error('Client has encountered a connection error and is not queryable'),
    new Error('timeout exceeded when trying to connect'),
    Object.assign(new Error('connect EMFILE 127.0.0.1:5432 - Local (undefined:undefined)'), { code: 'EMFILE' }),
    Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }),
    Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' }),
    Object.assign(new Error('the database system is starting up'), { code: '57P03' }),
    Object.assign(new Error('connection failure'), { code: '08006' }),
  ];
  for (const err of unavailable) {
    assert.ok(isDatabaseUnavailable(err), err.message);
    const e = fromPgError(err);
    assert.ok(e instanceof AppError && e.code === 'unavailable' && e.status === 503 && e.retryAfter! > 0, err.message);
  }
  for (const err of [new Error('boom'), Object.assign(new Error('duplicate key'), { code: '23505' }), 'Connection terminated', null]) {
    assert.equal(isDatabaseUnavailable(err), false, String(err));
  }
  // A client's reset of its own request stream is the request's failure, not the database's.
  const aborted = Object.assign(new Error('aborted'), { code: 'ECONNRESET', statusCode: 400 });
  assert.equal(toAppError(aborted).code, 'bad_request');
});

const POSTGRES = Boolean(process.env.DATABASE_URL);
const lines: Array<Record<string, unknown>> = [];
let t: TestApp;
let proxy: Awaited<ReturnType<typeof tcpProxy>>;
let directUrl: string;
let tenant: Tenant;
let token: string;

before(async () => {
  if (!POSTGRES) return;
  t = await startApp(
    // Short connection timeout: nothing in this file should wait long for a dead database.
    { DATABASE_CONNECT_TIMEOUT_MS: '1000' },
    {
      log: capturingLogger(lines),
      databaseUrl: async (url) => {
        directUrl = url;
        const u = new URL(url);
        proxy = await tcpProxy({ host: u.hostname, port: Number(u.port || 5432) });
        u.hostname = '127.0.0.1';
        u.port = String(proxy.port);
        return u.toString();
      },
    },
  );
  tenant = await seedTenant(t.deps);
  token = await tokenFor(t, tenant);
});

after(async () => {
  if (!POSTGRES) return;
  proxy.restore();
  await t.close();
  await proxy.close();
});

/** Ends every session of this file's own database except the caller's. */
async function terminateOwnBackends(): Promise<number> {
  const c = new pg.Client({ connectionString: directUrl });
  await c.connect();
  try {
    const r = await c.query(
      'select count(pg_terminate_backend(pid))::int as n from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()',
    );
    return r.rows[0].n as number;
  } finally {
    await c.end();
  }
}

const gql = (query: string) =>
  fetch(`${t.url}/api/graphql`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ query }),
  });
const exchange = () =>
  fetch(`${t.url}/api/v1/oauth/token`, {
    method: 'POST',
    body: new URLSearchParams({ grant_type: 'client_credentials', client_id: tenant.clientId, client_secret: tenant.clientSecret }),
  });
const FACT_QUERY = '{ factQuery(dataModelSlug: "nothing-here") { totalCount } }';

function assertRetryAfter(res: { status: number; headers: Headers }, what: string): void {
  assert.equal(res.status, 503, what);
  const ra = Number(res.headers.get('retry-after'));
  assert.ok(Number.isInteger(ra) && ra > 0, `${what}: Retry-After ${res.headers.get('retry-after')}`);
}

/** Every surface answers 503 with Retry-After in its own error shape. */
async function assertUnavailableEverywhere(): Promise<void> {
  const api = jsonApi(t, token);
  const list = await api.get('/api/json/v1/data_models');
  assertRetryAfter(list, 'JSON:API list');
  assert.equal(list.body.errors[0].code, 'unavailable', list.text);
  const create = await api.post('/api/json/v1/data_models', dataModelDoc({ name: 'During outage', slug: 'during-outage' }));
  assertRetryAfter(create, 'JSON:API create');
  assert.equal(create.body.errors[0].code, 'unavailable', create.text);

  const q = await gql(FACT_QUERY);
  assertRetryAfter(q, 'GraphQL');
  const qBody = (await q.json()) as { errors: Array<{ extensions: { code: string } }> };
  assert.equal(qBody.errors[0]!.extensions.code, 'unavailable');

  const tok = await exchange();
  assertRetryAfter(tok, 'token endpoint');
  assert.equal(((await tok.json()) as { error: string }).error, 'temporarily_unavailable');

  const ready = await fetch(`${t.url}/readyz`);
  assertRetryAfter(ready, '/readyz');
  await ready.body?.cancel();
}

/** The service answers again by itself: polls the three surfaces until each is 200. */
async function assertRecovers(): Promise<void> {
  const api = jsonApi(t, token);
  let last = '';
  for (let i = 0; i < 100; i++) {
    const list = await api.get('/api/json/v1/data_models');
    const q = await gql(FACT_QUERY);
    const tok = await exchange();
    last = `${list.status} ${q.status} ${tok.status}`;
    for (const res of [list, q, tok]) assert.notEqual(res.status, 500, 'never 500 while recovering');
    await q.body?.cancel();
    await tok.body?.cancel();
    if (last === '200 200 200') return;
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.fail(`did not recover: ${last}`);
}

test(
  'sessions terminated under load: the process survives, answers are 200 or 503, never 500, and it recovers',
  { skip: POSTGRES ? false : 'PostgreSQL only: PGlite is in the process, there is no session to lose' },
  async () => {
    const api = jsonApi(t, token);
    const statuses: number[] = [];
    let stop = false;
    let n = 0;
    const client = async () => {
      while (!stop) {
        const i = n++;
        const res =
          i % 3 === 0
            ? await api.get('/api/json/v1/data_models')
            : i % 3 === 1
              ? await gql(FACT_QUERY)
              : await api.post('/api/json/v1/data_models', dataModelDoc({ name: `Load ${i}`, slug: `load-${i}` }));
        statuses.push(res.status);
        if (res.status === 503) assert.ok(res.headers.get('retry-after'), 'a 503 carries Retry-After');
      }
    };
    const waitFor = async (count: number) => {
      while (statuses.length < count) await new Promise((r) => setTimeout(r, 5));
    };
    // A checked-out client with no query running when its session ends: pg emits 'error' on it.
    await t.deps.db.connection().execute(async (conn) => {
      await sql`select 1`.execute(conn);
      const clients = Array.from({ length: 6 }, client);
      await waitFor(12);
      assert.ok((await terminateOwnBackends()) > 0);
      await waitFor(statuses.length + 12);
      await terminateOwnBackends();
      await waitFor(statuses.length + 12);
      stop = true;
      await Promise.all(clients);
      // The held client's 'error' arrives while it is still checked out.
      for (let i = 0; i < 100 && !lines.some((l) => l.msg === 'database connection lost'); i++) await new Promise((r) => setTimeout(r, 20));
    });
    assert.deepEqual(
      statuses.filter((s) => ![200, 201, 503].includes(s)),
      [],
      `answers during the terminations: ${statuses.join(' ')}`,
    );
    assert.ok(
      lines.some((l) => l.msg === 'database connection lost'),
      'the lost session was logged',
    );
    await assertRecovers();
  },
);

test(
  'the database out of reach: 503 with Retry-After on every surface, then recovery by itself',
  { skip: POSTGRES ? false : 'PostgreSQL only: PGlite is in the process, there is no connection to cut' },
  async () => {
    await assertRecovers();
    // Connections dropped as they open ("Connection terminated unexpectedly").
    proxy.cut();
    await assertUnavailableEverywhere();
    proxy.restore();
    await assertRecovers();

    // Nothing listening (ECONNREFUSED).
    await proxy.refuse();
    await assertUnavailableEverywhere();
    await proxy.listenAgain();
    await assertRecovers();

    assert.deepEqual(
      lines.filter((l) => (l.level as number) >= 50),
      [],
      'an outage is logged as a warning, never as an error',
    );
  },
);
