/**
 * The console's connectors and API specifications: the list shows each connector's status
 * and the specifications; Verify (by keyboard) turns a connector verified against a mock
 * provider and shows a failing one's error plainly; a specification's operations filter;
 * an update that drops an operation shows in its drift report; the connector's secret is
 * never in the page. An inbound connector shows its scheme and the status its deliveries
 * gave it, with no Verify button and none of the outbound panels.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import type { Page } from 'playwright-core';
import { jsonApi, seedAccount, seedTenant, startApp, tokenFor } from '../helpers/app.ts';
import { BROWSER_SKIP, assertAccessible, consoleAs, distinctPngBytes, screenshot } from '../helpers/browser.ts';
import { mockProvider } from '../connectors/mock-provider.ts';
import { takeBudget } from '../../src/connectors/rate.ts';
import { recordInboundStatus } from '../../src/connectors/connectors.sql.ts';
import { FAILING_AFTER } from '../../src/connectors/inbound-status.ts';
import fs from 'node:fs';

const API = '/api/json/v1';
const t = await startApp({ ALLOW_PRIVATE_EGRESS: 'true' });
after(() => t.close());
const tenant = await seedTenant(t.deps);
const api = jsonApi(t, await tokenFor(t, tenant));
const mock = await mockProvider();
after(() => mock.close());
// The provider behind /broken refuses every key, as a revoked one would be.
mock.fallback = (req) => (req.path.startsWith('/broken') ? { status: 401, body: { error: 'invalid api key' } } : { status: 200, body: { ok: true } });

const SECRET = `sk_live_${'q7'.repeat(20)}`;
const BROKEN_SECRET = `sk_old_${'z3'.repeat(20)}`;

function document(withCreate: boolean): string {
  const orders: Record<string, unknown> = { get: { operationId: 'listOrders', summary: 'List the orders', responses: { 200: { description: 'ok' } } } };
  if (withCreate) orders.post = { operationId: 'createOrder', summary: 'Place an order', responses: { 201: { description: 'created' } } };
  return JSON.stringify({
    openapi: '3.0.3',
    info: { title: 'Shop orders', version: '2.1' },
    servers: [{ url: `${mock.url}/v1`, description: 'The mock shop' }],
    components: { securitySchemes: { ApiKey: { type: 'apiKey', in: 'header', name: 'X-Api-Key' } } },
    paths: {
      '/health': { get: { operationId: 'getHealth', summary: 'Is the shop up', responses: { 200: { description: 'ok' } } } },
      '/orders': orders,
      '/orders/{id}': {
        get: {
          operationId: 'getOrder',
          summary: 'One order',
          parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'string' } }],
          responses: { 200: { description: 'ok' } },
        },
      },
    },
  });
}

async function create(path: string, type: string, attributes: Record<string, unknown>): Promise<string> {
  const r = await api.post(`${API}/${path}`, { data: { type, attributes } });
  assert.equal(r.status, 201, r.text);
  return r.body.data.id;
}

const orders = await create('external_connectors', 'external_connector', {
  name: 'Shop orders',
  type: 'http',
  direction: 'outbound',
  auth_type: 'api_key',
  secret: SECRET,
  config: { base_url: `${mock.url}/v1`, health_operation: 'getHealth', rate_limit: { requests: 10, per_seconds: 3600 } },
});
const broken = await create('external_connectors', 'external_connector', {
  name: 'Legacy billing',
  type: 'http',
  direction: 'outbound',
  auth_type: 'api_key',
  secret: BROKEN_SECRET,
  config: { base_url: `${mock.url}/broken` },
});
const spec = await create('api_specs', 'api_spec', { name: 'Shop', format: 'json', raw_document: document(true), external_connector_id: orders });

/** A route of the signed-in console: a hash change, since a reload signs out. */
async function go(page: Page, hash: string): Promise<void> {
  await page.evaluate(`location.hash = ${JSON.stringify(hash)}`);
}

/** A section of the page by its heading. */
function section(page: Page, title: string) {
  return page.locator('section.section').filter({ has: page.getByRole('heading', { level: 2, name: title, exact: true }) });
}

function assertNoSecret(html: string, where: string): void {
  for (const s of [SECRET, BROKEN_SECRET, tenant.clientSecret]) assert.ok(!html.includes(s), `a secret is in the page of ${where}`);
}

describe('connectors and API specifications', { skip: BROWSER_SKIP }, () => {
  it('lists the connectors with their status and the specifications with their connector', async () => {
    const page = await consoleAs(t, tenant);
    await go(page, '#/connectors');
    const connectors = page.getByRole('table', { name: 'External connectors' });
    const row = connectors.getByRole('row').filter({ hasText: 'Shop orders' });
    await row.waitFor();
    assert.match(await row.innerText(), /api_key\s+unverified/);
    assert.equal(await connectors.getByRole('row').count(), 3);
    const specs = page.getByRole('table', { name: 'API specifications' });
    const specRow = specs.getByRole('row').filter({ hasText: 'Shop' });
    assert.match(await specRow.innerText(), /Shop\s+Shop orders\s+2\.1\s+4\s+Shop orders/);
    assert.equal(await specRow.getByRole('link', { name: 'Shop orders' }).getAttribute('href'), `#/connectors/${orders}`);
    assertNoSecret(await page.content(), 'the list');
    await assertAccessible(page, 'the connectors list');

    // The status filter keeps to the address.
    await page.getByLabel('Status').selectOption('failing');
    await connectors.waitFor({ state: 'detached' });
    assert.match(await page.getByText('No failing connector.').innerText(), /No failing connector/);
    assert.match(page.url(), /#\/connectors\?status=failing$/);
  });

  it('verifies a connector by keyboard against the provider; its page shows no secret', async () => {
    const page = await consoleAs(t, tenant);
    await go(page, '#/connectors');
    // By keyboard: focus the connector's link, Enter opens its page.
    await page.getByRole('table', { name: 'External connectors' }).getByRole('link', { name: 'Shop orders' }).focus();
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { level: 1, name: 'Shop orders' }).waitFor();
    assert.match(await page.getByText('Secret stored').locator('xpath=following-sibling::dd[1]').innerText(), /^yes$/);
    assert.match(await page.locator('dl.props').nth(0).innerText(), /unverified/);
    // The configured budget and the current window's use.
    const rate = section(page, 'Rate limit');
    await rate.getByText('Used in this window').waitFor();
    assert.match(await rate.innerText(), /At most 10 calls every hour/);
    // Three calls counted where calls through the connector count them, then Refresh.
    for (let i = 0; i < 3; i++) await takeBudget(t.deps.connectors.counter, orders, { requests: 10, perSeconds: 3600 }, t.deps.clock);
    await rate.getByRole('button', { name: 'Refresh' }).click();
    // The window slides: the three count for the next hour.
    await rate.getByText('3 of 10', { exact: true }).waitFor();
    assert.match(await rate.innerText(), /Remaining\s+\d+/);
    // The attached specification, linked.
    assert.equal(
      await page.getByRole('table', { name: 'Attached API specifications' }).getByRole('link', { name: 'Shop' }).getAttribute('href'),
      `#/api-specs/${spec}`,
    );

    const before = mock.requests.length;
    await page.getByRole('button', { name: 'Verify' }).focus();
    await page.keyboard.press('Enter');
    await page.getByRole('status').filter({ hasText: 'Verified just now' }).waitFor();
    assert.match(await page.locator('dl.props').nth(0).innerText(), /verified/);
    const call = mock.requests.slice(before).find((r) => r.path === '/v1/health');
    assert.ok(call, 'verification did not call the health operation');
    assert.equal(call.headers['x-api-key'], SECRET);
    assert.equal((await api.get(`${API}/external_connectors/${orders}`)).body.data.attributes.status, 'verified');

    assertNoSecret(await page.content(), 'the connector');
    await assertAccessible(page, 'the connector page');
    const png = await screenshot(page, 'connector-page');
    assert.ok(distinctPngBytes(png) > 16);
  });

  it("shows a failing provider's error plainly, on the page and in the list", async () => {
    const page = await consoleAs(t, tenant);
    await go(page, `#/connectors/${broken}`);
    await page.getByRole('heading', { level: 1, name: 'Legacy billing' }).waitFor();
    await section(page, 'Rate limit').getByText('No rate limit').waitFor();
    await page.getByRole('button', { name: 'Verify' }).focus();
    await page.keyboard.press('Enter');
    const alert = page.getByRole('alert');
    await alert.waitFor();
    const text = await alert.innerText();
    assert.match(text, /Verification failed/);
    assert.match(text, new RegExp(`GET ${mock.url}/broken/?: The provider answered 401`));
    assertNoSecret(await page.content(), 'a failing connector');
    await assertAccessible(page, 'a failing connector');

    await go(page, '#/connectors');
    const row = page.getByRole('table', { name: 'External connectors' }).getByRole('row').filter({ hasText: 'Legacy billing' });
    await row.waitFor();
    assert.match(await row.innerText(), /failing[\s\S]*401/);
    assert.match(await page.getByRole('table', { name: 'External connectors' }).getByRole('row').filter({ hasText: 'Shop orders' }).innerText(), /verified/);
    const png = await screenshot(page, 'connectors-list');
    assert.ok(distinctPngBytes(png) > 16);
  });

  it('lists a specification’s operations, filters them, and shows the drift of its last update', async () => {
    const page = await consoleAs(t, tenant);
    await go(page, `#/api-specs/${spec}`);
    await page.getByRole('heading', { level: 1, name: 'Shop' }).waitFor();
    const ops = page.getByRole('table', { name: 'Operations', exact: true });
    await ops.waitFor();
    assert.equal(await ops.getByRole('row').count(), 5);
    assert.match(await ops.getByRole('row').filter({ hasText: 'createOrder' }).innerText(), /POST\s+\/orders\s+createOrder\s+Place an order/);
    assert.match(await section(page, 'Servers').innerText(), new RegExp(`${mock.url}/v1 — The mock shop`));
    assert.match(await page.getByRole('table', { name: 'Security schemes' }).innerText(), /ApiKey\s+apiKey\s+X-Api-Key in header/);
    await page.getByText('No change recorded.').waitFor();

    // By keyboard: type into the filter.
    await page.getByLabel('Filter operations').focus();
    await page.keyboard.type('get orders');
    await page.getByRole('status').filter({ hasText: '2 of 4 operations' }).waitFor();
    assert.deepEqual(
      (await ops.getByRole('row').allInnerTexts()).slice(1).map((r) => r.split(/\s+/)[0]),
      ['GET', 'GET'],
    );
    await page.getByLabel('Filter operations').fill('place');
    await page.getByRole('status').filter({ hasText: '1 of 4 operations' }).waitFor();
    assert.match(page.url(), /\?q=place$/);
    await page.getByLabel('Filter operations').fill('');
    await page
      .getByRole('status')
      .filter({ hasText: /^4 operations$/ })
      .waitFor();

    assertNoSecret(await page.content(), 'the specification');
    await assertAccessible(page, 'the API specification page');

    // A new document without createOrder: the drift report names it removed.
    const patched = await api.patch(`${API}/api_specs/${spec}`, { data: { type: 'api_spec', id: spec, attributes: { raw_document: document(false) } } });
    assert.equal(patched.status, 200, patched.text);
    await go(page, '#/connectors');
    await page.getByRole('heading', { level: 1, name: 'Connectors' }).waitFor();
    await go(page, `#/api-specs/${spec}`);
    const drift = page.getByRole('table', { name: 'Operations changed by the last update' });
    await drift.waitFor();
    assert.match(await drift.getByRole('row').nth(1).innerText(), /removed\s+createOrder/);
    assert.equal(await drift.getByRole('row').count(), 2);
    await page
      .getByRole('status')
      .filter({ hasText: /^3 operations$/ })
      .waitFor();
    await assertAccessible(page, 'the API specification page with its drift report');
    const png = await screenshot(page, 'api-spec-page');
    assert.ok(distinctPngBytes(png) > 16);
  });

  it("shows the API's refusal when a member may not verify", async () => {
    const member = await seedAccount(t.deps, tenant, { role: 'member' });
    const page = await consoleAs(t, member);
    await go(page, `#/connectors/${orders}`);
    await page.getByRole('heading', { level: 1, name: 'Shop orders' }).waitFor();
    await page.getByRole('button', { name: 'Verify' }).focus();
    await page.keyboard.press('Enter');
    const alert = page.getByRole('alert').filter({ hasText: 'Verify failed' });
    await alert.waitFor();
    assert.match(await alert.innerText(), /code forbidden · request \S+/);
    assertNoSecret(await page.content(), "a member's view of a connector");
  });

  it('says so when a connector or specification does not exist', async () => {
    const page = await consoleAs(t, tenant);
    await go(page, '#/connectors/00000000-0000-7000-8000-000000000000');
    assert.match(await page.getByRole('alert').innerText(), /Could not load the connector[\s\S]*not_found/);
    await go(page, '#/api-specs/00000000-0000-7000-8000-000000000000');
    await page.getByRole('alert').filter({ hasText: 'Could not load the API specification' }).waitFor();
  });

  it('shows an inbound connector as what it is: its scheme, the status its deliveries gave it, no Verify, no outbound panels', async () => {
    const GH_SECRET = `gh-${'k9'.repeat(12)}`;
    const hooks = await create('external_connectors', 'external_connector', {
      name: 'GitHub pushes',
      type: 'http',
      direction: 'inbound',
      auth_type: 'hmac',
      secret: GH_SECRET,
      config: { signature_scheme: 'github' },
    });
    // The console's copy of the count it explains.
    const shared = fs.readFileSync(new URL('../../console/src/pages/connector-shared.tsx', import.meta.url), 'utf8');
    assert.equal(Number(/export const FAILING_AFTER = (\d+);/.exec(shared)?.[1]), FAILING_AFTER);
    // As three bad deliveries leave it (test/webhooks/inbound-status.test.ts drives the real path).
    const error = 'signature mismatch (X-Hub-Signature-256) at 2026-12-02T05:01:02Z';
    assert.equal(await recordInboundStatus(t.deps.db, tenant.workspaceId, hooks, 'failing', error, new Date()), true);

    const page = await consoleAs(t, tenant);
    await go(page, '#/connectors');
    const row = page.getByRole('table', { name: 'External connectors' }).getByRole('row').filter({ hasText: 'GitHub pushes' });
    await row.waitFor();
    assert.match(await row.innerText(), /inbound\s+inbound · hmac \(GitHub\)\s+failing/);
    assert.match(
      await page.getByRole('table', { name: 'External connectors' }).getByRole('row').filter({ hasText: 'Shop orders' }).innerText(),
      /outbound\s+http · api_key/,
    );

    await go(page, `#/connectors/${hooks}`);
    await page.getByRole('heading', { level: 1, name: 'GitHub pushes' }).waitFor();
    const status = section(page, 'Status');
    assert.match(await status.innerText(), /failing/);
    assert.match(await status.innerText(), /The last deliveries failed their check\s+signature mismatch \(X-Hub-Signature-256\) at 2026-12-02T05:01:02Z/);
    assert.match(await status.innerText(), /failing after 3 in a row fail it/);
    assert.match(await section(page, 'Connector').innerText(), /Kind\s+inbound · hmac \(GitHub\)/);
    assert.doesNotMatch(await section(page, 'Connector').innerText(), /Type\s+http/);
    assert.equal(await page.getByRole('button', { name: 'Verify' }).count(), 0);
    assert.equal(await section(page, 'Rate limit').count(), 0);
    assert.equal(await section(page, 'API specification').count(), 0);
    assert.ok(!(await page.content()).includes(GH_SECRET));
    await assertAccessible(page, 'an inbound connector');
    await screenshot(page, 'connector-inbound');
  });
});
