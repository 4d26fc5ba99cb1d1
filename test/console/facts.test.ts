/**
 * The console's Facts page: a data model's latest facts (conditions, sorting, pages, all in
 * the address), one entity's timeline as an SVG chart and a table, and the GraphQL query of
 * each view, which answers the same rows when a user sends it as shown.
 */
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import type { Page } from 'playwright-core';
import { appWithTenant, tokenFor } from '../helpers/app.ts';
import { BROWSER_SKIP, assertAccessible, consoleAs, distinctPngBytes, screenshot } from '../helpers/browser.ts';

const API = '/api/json/v1';
const { t, tenant, api } = await appWithTenant();
const slug = 'orders';

/** Facts with known observed_at values; the latest per entity is the last of each. */
const FACTS: Array<[string, string, number, number, string]> = [
  // order_id, observed_at, amount, qty, status
  ['o1', '2026-06-01T10:00:00Z', 10, 1, 'open'],
  ['o1', '2026-06-02T10:00:00Z', 12.5, 2, 'open'],
  ['o1', '2026-06-03T10:00:00Z', 9, 2, 'pending'],
  ['o1', '2026-06-05T10:00:00Z', 15, 3, 'closed'],
  ['o2', '2026-06-04T10:00:00Z', 40, 4, 'open'],
  ['o3', '2026-06-01T09:00:00Z', 5, 1, 'open'],
  ['o3', '2026-06-06T10:00:00Z', 7, 1, 'open'],
  ['o4', '2026-06-02T09:00:00Z', 100, 9, 'closed'],
  ['o5', '2026-06-03T09:00:00Z', 55.5, 5, 'pending'],
];

before(async () => {
  const m = await api.post(`${API}/data_models`, { data: { type: 'data_model', attributes: { name: 'Orders', slug } } });
  assert.equal(m.status, 201, m.text);
  const fields = [
    { name: 'order_id', type: 'string', is_primary_key: true, is_required: true },
    { name: 'amount', type: 'float' },
    { name: 'qty', type: 'integer' },
    { name: 'status', type: 'string' },
  ];
  for (const field of fields) {
    const r = await api.post(`${API}/data_model_fields`, { data: { type: 'data_model_field', attributes: { data_model_id: m.body.data.id, ...field } } });
    assert.equal(r.status, 201, r.text);
  }
  const ndjson = FACTS.map(([order_id, observed_at, amount, qty, status]) => JSON.stringify({ observed_at, data: { order_id, amount, qty, status } })).join(
    '\n',
  );
  const res = await fetch(`${t.url}/admin/v1/facts/import?${new URLSearchParams({ workspace_id: tenant.workspaceId, data_model: slug })}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${t.adminToken}`, 'content-type': 'application/x-ndjson' },
    body: `${ndjson}\n`,
  });
  const body = (await res.json()) as { data: { written: number } };
  assert.equal(res.status, 200, JSON.stringify(body));
  assert.equal(body.data.written, FACTS.length);
});

/** What a predicate run in the page sees of it (this file is type-checked without the DOM's types). */
interface InPage {
  document: { querySelectorAll(selector: string): ArrayLike<{ textContent: string | null }> };
}

/** The entity column of the latest table, once it shows `expected` (or the assertion of what it shows). */
async function expectEntities(page: Page, expected: string[]): Promise<void> {
  const read = () => page.getByTestId('latest-facts').locator('tbody tr td:first-child').allInnerTexts();
  try {
    await page.waitForFunction(
      (want) =>
        Array.from((globalThis as unknown as InPage).document.querySelectorAll('[data-testid=latest-facts] tbody tr td:first-child'))
          .map((td) => td.textContent)
          .join(',') === want,
      expected.join(','),
      { timeout: 10_000 },
    );
  } catch {
    assert.deepEqual(await read(), expected);
  }
}

/** Sends the query the page shows, as shown, with a token of the same account: what a user pasting it gets. */
async function sendShownQuery(page: Page): Promise<Array<{ entityId: string; observedAt: string; data: string }>> {
  const query = await page.getByLabel('GraphQL query', { exact: true }).innerText();
  const variables = JSON.parse(await page.getByLabel('Variables', { exact: true }).innerText()) as Record<string, unknown>;
  const res = await fetch(`${t.url}/api/graphql`, {
    method: 'POST',
    headers: { authorization: `Bearer ${await tokenFor(t, tenant)}`, 'content-type': 'application/json' },
    body: JSON.stringify({ query, variables }),
  });
  const doc = (await res.json()) as { data?: { factQuery: { results: Array<{ entityId: string; observedAt: string; data: string }> } }; errors?: unknown };
  assert.equal(res.status, 200);
  assert.equal(doc.errors, undefined, JSON.stringify(doc.errors));
  return doc.data!.factQuery.results;
}

const latestUrl = (query = '') => `${t.url}/console#/facts/${slug}${query ? `?${query}` : ''}`;

describe('facts', { skip: BROWSER_SKIP }, () => {
  it('lists the data models and shows each entity latest fact, newest first', async () => {
    const page = await consoleAs(t, tenant);
    await page.getByRole('link', { name: 'Facts', exact: true }).click();
    // By keyboard: focus the data model's link and press Enter.
    await page.getByRole('link', { name: 'Orders' }).focus();
    await page.keyboard.press('Enter');
    await expectEntities(page, ['o3', 'o1', 'o2', 'o5', 'o4']);
    const o1 = page.getByTestId('latest-facts').locator('tbody tr', { hasText: 'o1' });
    assert.deepEqual((await o1.locator('td').allInnerTexts()).slice(2), ['o1', '15', '3', 'closed']);
    assert.match(await page.getByTestId('fact-count').innerText(), /^5 entities · page 1 of 1$/);
    await assertAccessible(page, 'the latest facts');
    await screenshot(page, 'facts-latest');

    const shown = await sendShownQuery(page);
    assert.deepEqual(
      shown.map((f) => f.entityId),
      ['o3', 'o1', 'o2', 'o5', 'o4'],
    );
    const curl = await page.getByLabel('Curl command', { exact: true }).innerText();
    assert.match(curl, /Authorization: Bearer \$TOKEN/);
    assert.match(curl, /\/api\/graphql/);
    assert.ok(!(await page.content()).includes(tenant.clientSecret), 'the secret is rendered');
  });

  it('sorts by observed at on the server and by a field within the page', async () => {
    const page = await consoleAs(t, tenant);
    await page.goto(latestUrl());
    await expectEntities(page, ['o3', 'o1', 'o2', 'o5', 'o4']);
    // By keyboard: the column heading is a link; Enter follows it.
    await page.getByRole('link', { name: 'Observed at: sort ascending' }).focus();
    await page.keyboard.press('Enter');
    await expectEntities(page, ['o4', 'o5', 'o2', 'o1', 'o3']);
    assert.match(page.url(), /sort=observed_at&dir=asc/);
    assert.equal(await page.getByRole('columnheader', { name: /Observed at/ }).getAttribute('aria-sort'), 'ascending');
    assert.deepEqual(
      (await sendShownQuery(page)).map((f) => f.entityId),
      ['o4', 'o5', 'o2', 'o1', 'o3'],
    );
    await page.getByRole('link', { name: 'amount: sort descending within this page' }).click();
    await expectEntities(page, ['o4', 'o5', 'o2', 'o1', 'o3']);
    await page.getByRole('link', { name: 'amount: sort ascending within this page' }).click();
    await expectEntities(page, ['o3', 'o1', 'o2', 'o5', 'o4']);
    await page.getByRole('note').filter({ hasText: 'within this page' }).waitFor();
  });

  it('narrows by conditions, one of them added by keyboard only, kept in the address', async () => {
    const page = await consoleAs(t, tenant);
    await page.goto(latestUrl());
    await expectEntities(page, ['o3', 'o1', 'o2', 'o5', 'o4']);
    await page.getByLabel('Field').selectOption('status');
    // By keyboard: the operator defaults to "equals"; type the value and press Enter.
    await page.getByLabel('Value').focus();
    await page.keyboard.type('open');
    await page.keyboard.press('Enter');
    await expectEntities(page, ['o3', 'o2']);
    assert.match(await page.getByTestId('fact-count').innerText(), /^2 entities/);
    // Only the operators a number allows are offered for a number.
    await page.getByLabel('Field').selectOption('amount');
    const ops = await page.getByLabel('Operator').locator('option').allInnerTexts();
    assert.ok(ops.includes('at least') && !ops.includes('contains'), ops.join());
    await page.getByLabel('Operator').selectOption('gte');
    await page.getByLabel('Value').fill('40');
    await page.getByRole('button', { name: 'Add condition' }).click();
    await expectEntities(page, ['o2']);
    const conditions = await page.getByRole('list', { name: 'Conditions in force' }).innerText();
    assert.match(conditions, /status equals "open"/);
    assert.match(conditions, /amount at least 40/);
    assert.deepEqual(
      (await sendShownQuery(page)).map((f) => f.entityId),
      ['o2'],
    );
    // A typed value the field cannot take is said before anything is sent.
    await page.getByLabel('Value').fill('lots');
    await page.getByRole('button', { name: 'Add condition' }).click();
    assert.match(await page.getByRole('alert').innerText(), /amount takes a number/);

    // The address holds the view: another signed-in tab opening it sees the same rows.
    const shared = page.url();
    const other = await consoleAs(t, tenant);
    await other.goto(shared);
    await expectEntities(other, ['o2']);

    await page.getByRole('button', { name: 'Remove condition status equals "open"' }).click();
    await expectEntities(page, ['o2', 'o5', 'o4']);
    await assertAccessible(page, 'the latest facts with conditions');
  });

  it('pages through the entities with the numbers factQuery answers', async () => {
    const page = await consoleAs(t, tenant);
    await page.goto(latestUrl('limit=2'));
    await expectEntities(page, ['o3', 'o1']);
    assert.match(await page.getByTestId('fact-count').innerText(), /^5 entities · page 1 of 3$/);
    // By keyboard: Enter on the page's number.
    await page.getByRole('link', { name: 'Page 2' }).focus();
    await page.keyboard.press('Enter');
    await expectEntities(page, ['o2', 'o5']);
    assert.equal(await page.getByRole('link', { name: 'Page 2' }).getAttribute('aria-current'), 'page');
    await page.getByRole('link', { name: 'Next page' }).click();
    await expectEntities(page, ['o4']);
    assert.match(await page.getByTestId('fact-count').innerText(), /page 3 of 3$/);
    assert.deepEqual(
      (await sendShownQuery(page)).map((f) => f.entityId),
      ['o4'],
    );
    await page.getByLabel('Rows per page').selectOption('10');
    await expectEntities(page, ['o3', 'o1', 'o2', 'o5', 'o4']);
  });

  it("draws an entity's timeline: one point per fact and series, and the same facts as a table", async () => {
    const page = await consoleAs(t, tenant);
    await page.goto(latestUrl());
    // By keyboard: focus the entity's link and press Enter.
    await page.getByRole('link', { name: 'History of o1' }).focus();
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'History of o1' }).waitFor();
    const chart = page.getByRole('img', { name: /of o1 over observed at/ });
    await chart.waitFor();
    const o1 = FACTS.filter((f) => f[0] === 'o1');
    const points = page.getByTestId('fact-point');
    assert.equal(await points.count(), o1.length * 2, 'amount and qty are drawn');
    assert.match(
      (await chart.getAttribute('aria-label')) ?? '',
      /amount and qty of o1 over observed at: 4 facts from .+; amount from 9 to 15; qty from 1 to 3/,
    );

    // By keyboard: Space on the qty checkbox leaves amount alone in the chart.
    await page.getByRole('checkbox', { name: 'qty' }).focus();
    await page.keyboard.press('Space');
    await page.waitForFunction((n) => (globalThis as unknown as InPage).document.querySelectorAll('[data-testid=fact-point]').length === n, o1.length);
    assert.equal(await points.count(), o1.length);
    const titles = await points.locator('title').allTextContents();
    assert.equal(titles.length, o1.length);
    assert.ok(
      o1.every(([, , amount], i) => titles[i]!.startsWith(`amount ${amount} at `)),
      titles.join(' | '),
    );

    const rows = page.getByTestId('timeline-facts').locator('tbody tr');
    assert.equal(await rows.count(), o1.length);
    assert.deepEqual(
      await rows.locator('td:nth-child(3)').allInnerTexts(),
      o1.map((f) => String(f[2])),
    );
    await page.getByRole('checkbox', { name: 'qty' }).blur();
    const png = await page.getByTestId('timeline-chart').screenshot();
    assert.ok(distinctPngBytes(png) > 16, 'the chart is blank');
    await assertAccessible(page, 'the timeline');
    await screenshot(page, 'facts-timeline');

    const shown = await sendShownQuery(page);
    assert.deepEqual(
      shown.map((f) => [f.entityId, f.observedAt, (JSON.parse(f.data) as { amount: number }).amount]),
      o1.map(([id, at, amount]) => [id, new Date(at).toISOString(), amount]),
    );
    assert.match(await page.getByLabel('Curl command', { exact: true }).innerText(), /Bearer \$TOKEN/);
  });

  it('says so when the slug names no data model', async () => {
    const page = await consoleAs(t, tenant);
    await page.goto(latestUrl().replace(slug, 'no-such-model'));
    await page.getByRole('heading', { name: 'Data model not found' }).waitFor();
    // By keyboard: back to the list of data models.
    await page.getByRole('link', { name: 'See its data models.' }).focus();
    await page.keyboard.press('Enter');
    await page.getByRole('link', { name: 'Orders' }).waitFor();
  });
});
