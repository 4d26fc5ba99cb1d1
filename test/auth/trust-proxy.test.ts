/**
 * TRUST_PROXY: behind a balancer the token-exchange window counts the client's address from
 * X-Forwarded-For, and only when the peer is a trusted proxy; otherwise the header is ignored,
 * so a client cannot escape its window by sending one.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { seedTenant, startApp, type TestApp, type Tenant } from '../helpers/app.ts';

const MAX = 2;
const apps: TestApp[] = [];
after(async () => {
  for (const a of apps) await a.close();
});

async function appWith(env: Record<string, string>): Promise<TestApp> {
  // A window far longer than the test, so no boundary resets a count mid-way.
  const a = await startApp({ TOKEN_RATE_LIMIT_MAX: String(MAX), TOKEN_RATE_LIMIT_WINDOW_SECONDS: '3600', ...env });
  apps.push(a);
  return a;
}

async function exchange(t: TestApp, tenant: Tenant, forwardedFor?: string): Promise<number> {
  const headers: Record<string, string> = { 'content-type': 'application/x-www-form-urlencoded' };
  if (forwardedFor !== undefined) headers['x-forwarded-for'] = forwardedFor;
  const body = new URLSearchParams({ grant_type: 'client_credentials', client_id: tenant.clientId, client_secret: tenant.clientSecret });
  const res = await fetch(`${t.url}/api/v1/oauth/token`, { method: 'POST', headers, body });
  await res.arrayBuffer();
  return res.status;
}

/** Distinct documentation addresses per run, so a shared Redis window from another run cannot interfere. */
function clientAddress(): string {
  return `2001:db8::${Math.floor(Math.random() * 0xffff).toString(16)}:${Math.floor(Math.random() * 0xffff).toString(16)}`;
}

test('with the balancer trusted, each forwarded client address has its own token window', async () => {
  const t = await appWith({ TRUST_PROXY: '127.0.0.1,::1' });
  const tenant = await seedTenant(t.deps);
  const [a, b] = [clientAddress(), clientAddress()];
  for (let i = 0; i < MAX; i++) assert.equal(await exchange(t, tenant, a), 200);
  assert.equal(await exchange(t, tenant, a), 429, 'client a is over its window');
  // The balancer appends the client it saw; the leftmost untrusted hop is the client.
  assert.equal(await exchange(t, tenant, `198.51.100.7, ${b}`), 200, 'client b has a window of its own');
  assert.equal(await exchange(t, tenant, b), 200);
  assert.equal(await exchange(t, tenant, b), 429);
});

test('without TRUST_PROXY, X-Forwarded-For is ignored: one window for the peer', async () => {
  // The peer is 127.0.0.1 for every test file: its window is counted in this process, not in
  // a Redis shared with the others.
  const t = await appWith({ REDIS_URL: '' });
  const tenant = await seedTenant(t.deps);
  for (let i = 0; i < MAX; i++) assert.equal(await exchange(t, tenant, clientAddress()), 200);
  assert.equal(await exchange(t, tenant, clientAddress()), 429, 'a made-up forwarded address does not open a new window');
});
