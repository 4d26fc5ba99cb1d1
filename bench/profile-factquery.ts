/**
 * A CPU profile of factQuery requests, for finding where a request's own time goes: the app
 * in-process on the test database (DATABASE_URL, else PGlite), one model of 2,000 facts,
 * then sequential POST /api/graphql of a page of 50 with every field, sampled by the
 * inspector; prints the top self-time functions and the thread CPU per request.
 *   node bench/profile-factquery.ts   (PROFILE_REQUESTS, default 400)
 */
import { Session } from 'node:inspector/promises';
import { seedTenant, startApp, tokenFor } from '../test/helpers/app.ts';
import { createModel, FACT_FIELDS, insertFacts } from '../test/graphql/helpers.ts';
import { intEnv } from './common.ts';
import { topSelf } from './profile.ts';

const N = intEnv('PROFILE_REQUESTS', 400, 10, 100_000);
const t = await startApp({ RATE_LIMIT_MAX: '1000000', LOG_LEVEL: 'silent' });
try {
  const tenant = await seedTenant(t.deps);
  const token = await tokenFor(t, tenant);
  const model = await createModel(t.deps, tenant, 'invoices', [
    { name: 'invoice_id', type: 'string', is_primary_key: true },
    { name: 'amount', type: 'float' },
    { name: 'status', type: 'string' },
  ]);
  const base = Date.now() - 10 * 86_400_000;
  await insertFacts(
    t.deps,
    model,
    Array.from({ length: 2000 }, (_, i) => ({
      entity_id: `inv-${i % 500}`,
      observed_at: base + i * 60_000,
      data: { invoice_id: `inv-${i % 500}`, amount: i * 1.5, status: i % 3 ? 'open' : 'paid' },
    })),
  );
  const body = JSON.stringify({ query: `query { factQuery(dataModelSlug: "invoices", limit: 50) { count lastPage hasNextPage results { ${FACT_FIELDS} } } }` });
  const once = async () => {
    const res = await fetch(`${t.url}/api/graphql`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body,
    });
    const text = await res.text();
    if (res.status !== 200 || text.includes('"errors"')) throw new Error(`factQuery failed: ${res.status} ${text.slice(0, 300)}`);
  };
  for (let i = 0; i < 100; i++) await once();
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 200 });
  await session.post('Profiler.start');
  const c0 = process.threadCpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < N; i++) await once();
  const c = process.threadCpuUsage(c0);
  const wall = performance.now() - t0;
  const { profile } = (await session.post('Profiler.stop')) as { profile: Parameters<typeof topSelf>[0] };
  console.log(
    `${N} requests (${t.deps.engine}): thread CPU ${((c.user + c.system) / N).toFixed(0)} us/req (server and fetch client), wall ${(wall / N).toFixed(2)} ms/req`,
  );
  for (const p of topSelf(profile, 25)) console.log(`  ${(p.share * 100).toFixed(1).padStart(5)}%  ${p.name}`);
} finally {
  await t.close();
}
