/**
 * The console's Dashboards page and the Facts page's group-by view: widgets of each kind on
 * their grid, drawn from factAggregate (a widget's numbers are the answer to the query it
 * shows, and those equal a plain count of the facts), charts with their text twin, axe-core,
 * moving and resizing by keyboard (each press a PATCH of position, the focus kept), placing,
 * editing and deleting, and a refresh when the tab becomes visible again.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { before, describe, it } from 'node:test';
import type { Page } from 'playwright-core';
import { appWithTenant, tokenFor } from '../helpers/app.ts';
import { gzipSync } from 'node:zlib';
import { BROWSER_SKIP, assertAccessible, consoleAs, distinctPngBytes, screenshot } from '../helpers/browser.ts';
import { CONSOLE_DIST } from '../../src/console/surface.ts';

const API = '/api/json/v1';
const { t, tenant, api } = await appWithTenant();
const slug = 'orders';
const DAY = 86_400_000;
/** Midday UTC some days ago: the facts sit well inside the widgets' windows, and in one Paris day each. */
const daysAgo = (n: number) => new Date(Math.floor(Date.now() / DAY) * DAY - n * DAY + 12 * 3_600_000 - DAY).toISOString();

// order_id, days ago, amount, status, region; the latest per entity is its last line.
const FACTS: Array<[string, number, number, string, string]> = [
  ['o1', 9, 10, 'open', 'north'],
  ['o1', 3, 15, 'closed', 'north'],
  ['o2', 8, 40, 'open', 'south'],
  ['o3', 8, 5, 'open', 'north'],
  ['o3', 2, 7, 'open', 'north'],
  ['o4', 5, 100, 'closed', 'east'],
  ['o5', 4, 55.5, 'open', 'south'],
  ['o6', 1, 20, 'open', 'east'],
];

/** A plain computation over FACTS: each entity's latest fact. */
const latest = () => [...new Map(FACTS.map((f) => [f[0], f])).values()];

let modelId = '';
const placed: Record<string, string> = {};

async function place(attributes: Record<string, unknown>): Promise<string> {
  const r = await api.post(`${API}/dashboard_widgets`, {
    data: { type: 'dashboard_widget', attributes: { data_model_id: modelId, dashboard: 'ops', ...attributes } },
  });
  assert.equal(r.status, 201, r.text);
  return r.body.data.id;
}

before(async () => {
  const m = await api.post(`${API}/data_models`, { data: { type: 'data_model', attributes: { name: 'Orders', slug } } });
  assert.equal(m.status, 201, m.text);
  modelId = m.body.data.id;
  for (const field of [
    { name: 'order_id', type: 'string', is_primary_key: true, is_required: true },
    { name: 'amount', type: 'float' },
    { name: 'status', type: 'string' },
    { name: 'region', type: 'string' },
  ]) {
    const r = await api.post(`${API}/data_model_fields`, { data: { type: 'data_model_field', attributes: { data_model_id: modelId, ...field } } });
    assert.equal(r.status, 201, r.text);
  }
  const ndjson = FACTS.map(([order_id, ago, amount, status, region]) =>
    JSON.stringify({ observed_at: daysAgo(ago), data: { order_id, amount, status, region } }),
  );
  const res = await fetch(`${t.url}/admin/v1/facts/import?${new URLSearchParams({ workspace_id: tenant.workspaceId, data_model: slug })}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${t.adminToken}`, 'content-type': 'application/x-ndjson' },
    body: `${ndjson.join('\n')}\n`,
  });
  assert.equal(res.status, 200, await res.text());
  placed.open = await place({
    kind: 'number',
    title: 'Open orders',
    position: { x: 0, y: 0, w: 3, h: 2 },
    config: { filters: [{ field: 'status', op: 'eq', value: 'open' }], measures: [{ op: 'count', as: 'open' }], unit: 'orders' },
  });
  placed.perDay = await place({
    kind: 'line',
    title: 'Amount per day',
    position: { x: 3, y: 0, w: 9, h: 4 },
    config: {
      mode: 'timeline',
      window: 'P30D',
      bucket: 'day',
      measures: [{ op: 'count' }, { op: 'sum', field: 'amount' }],
      measure: 'sum_amount',
      unit: 'EUR',
    },
  });
  placed.byRegion = await place({
    kind: 'bar',
    title: 'Orders by region',
    position: { x: 0, y: 4, w: 6, h: 4 },
    config: { groupBy: ['region'], colors: ['#8250df'] },
  });
  placed.byStatus = await place({
    kind: 'table',
    title: 'By status',
    position: { x: 6, y: 4, w: 6, h: 4 },
    config: { groupBy: ['status'], measures: [{ op: 'count' }, { op: 'sum', field: 'amount' }] },
  });
});

const widget = (page: Page, id: string) => page.locator(`[data-widget="${id}"]`);

/** Sends the query a widget shows, as shown, with a token of the same account. */
async function shownAnswer(page: Page, id: string) {
  const w = widget(page, id);
  await w.getByText('Query', { exact: true }).click();
  const query = await w.getByLabel('GraphQL query', { exact: true }).innerText();
  const variables = JSON.parse(await w.getByLabel('Variables', { exact: true }).innerText()) as Record<string, unknown>;
  const res = await fetch(`${t.url}/api/graphql`, {
    method: 'POST',
    headers: { authorization: `Bearer ${await tokenFor(t, tenant)}`, 'content-type': 'application/json' },
    body: JSON.stringify({ query, variables }),
  });
  const doc = (await res.json()) as { data?: { factAggregate: any }; errors?: unknown };
  assert.equal(doc.errors, undefined, JSON.stringify(doc.errors));
  await w.getByText('Query', { exact: true }).click();
  return doc.data!.factAggregate as {
    groups: Array<{ keys: Array<{ string: string | null }>; bucket: string | null; values: Array<{ name: string; value: number | null }> }>;
  };
}

async function openOps(): Promise<Page> {
  const page = await consoleAs(t, tenant);
  await page.getByRole('link', { name: 'Dashboards', exact: true }).click();
  await page.getByRole('heading', { name: 'Dashboard ops' }).waitFor();
  await widget(page, placed.byStatus!).getByTestId('aggregate-table').waitFor();
  await widget(page, placed.perDay!).locator('.uplot').waitFor();
  await widget(page, placed.byRegion!).locator('.uplot').waitFor();
  return page;
}

describe('budget', () => {
  it('keeps uPlot out of the initial JavaScript, in a chunk of at most 40 KB gzipped', () => {
    const html = fs.readFileSync(path.join(CONSOLE_DIST, 'index.html'), 'utf8');
    const entry = /src="\/console\/assets\/([^"]+\.js)"/.exec(html)![1]!;
    const assets = path.join(CONSOLE_DIST, 'assets');
    // u-legend: a class name only uPlot's code holds.
    assert.doesNotMatch(fs.readFileSync(path.join(assets, entry), 'utf8'), /u-legend/, 'uPlot is not in the initial JavaScript');
    const chunks = fs.readdirSync(assets).filter((n) => n.startsWith('chunk-') && fs.readFileSync(path.join(assets, n), 'utf8').includes('u-legend'));
    assert.equal(chunks.length, 1, 'uPlot is in one chunk');
    const gz = gzipSync(fs.readFileSync(path.join(assets, chunks[0]!))).length;
    assert.ok(gz <= 40 * 1024, `the chart chunk is ${gz} bytes gzipped`);
  });
});

describe('dashboards', { skip: BROWSER_SKIP }, () => {
  it("draws each kind on its grid from factAggregate: a widget's numbers are its shown query's answer and a plain count", async () => {
    const page = await openOps();
    const open = latest().filter((f) => f[3] === 'open').length;
    assert.equal((await widget(page, placed.open!).getByTestId('widget-number').textContent())!.replace(/\s+/g, ' ').trim(), `${open} orders (open)`);
    const number = await shownAnswer(page, placed.open!);
    assert.equal(number.groups[0]!.values[0]!.value, open);

    // The table: one row per status, as the answer has them and as a plain computation counts them.
    const rows = await widget(page, placed.byStatus!)
      .locator('tbody tr')
      .evaluateAll((trs) => trs.map((tr) => [...tr.children].map((td) => td.textContent)));
    const table = await shownAnswer(page, placed.byStatus!);
    assert.deepEqual(
      rows,
      table.groups.map((g) => [
        g.keys[0]!.string,
        ...g.values.map((v) => (v.value === null ? '—' : v.value.toLocaleString('en-US', { maximumFractionDigits: 2 }))),
      ]),
    );
    const plain = new Map<string, [number, number]>();
    for (const f of latest()) plain.set(f[3], [(plain.get(f[3])?.[0] ?? 0) + 1, (plain.get(f[3])?.[1] ?? 0) + f[2]]);
    assert.deepEqual(new Map(rows.map((r) => [r[0]!, [Number(r[1]), Number(r[2]!.replaceAll(',', ''))]])), plain);

    // The bars' text twin: a region per row, its count.
    const bars = await widget(page, placed.byRegion!)
      .locator('table.visually-hidden tbody tr')
      .evaluateAll((trs) => trs.map((tr) => [...tr.children].map((td) => td.textContent)));
    const byRegion = await shownAnswer(page, placed.byRegion!);
    assert.deepEqual(
      bars,
      byRegion.groups.map((g) => [g.keys[0]!.string, String(g.values[0]!.value)]),
    );
    assert.equal(bars.length, new Set(latest().map((f) => f[4])).size);

    // The line's text twin: a day per row, the sum of that day's amounts (0 buckets are absent in a timeline).
    const line = await widget(page, placed.perDay!)
      .locator('table.visually-hidden tbody tr')
      .evaluateAll((trs) => trs.map((tr) => tr.children[1]!.textContent));
    const perDay = await shownAnswer(page, placed.perDay!);
    assert.deepEqual(
      line,
      perDay.groups.map((g) => `${g.values[1]!.value!.toLocaleString('en-US', { maximumFractionDigits: 2 })} EUR`),
    );
    assert.equal(perDay.groups.length, new Set(FACTS.map((f) => f[1])).size);
    assert.equal(
      perDay.groups.reduce((s, g) => s + g.values[1]!.value!, 0),
      FACTS.reduce((s, f) => s + f[2], 0),
    );

    // Laid out by position: the line sits right of the number, the table right of the bars, below.
    const box = async (id: string) => (await widget(page, id).boundingBox())!;
    const [n, l, b, tb] = [await box(placed.open!), await box(placed.perDay!), await box(placed.byRegion!), await box(placed.byStatus!)];
    assert.ok(l.x > n.x + n.width - 1 && Math.abs(l.y - n.y) < 2, 'line right of the number');
    assert.ok(b.y > l.y + l.height - 1 && tb.x > b.x + b.width - 1, 'bars below, table right of them');
    assert.ok(Math.abs(l.width / n.width - 3) < 0.2, 'w 9 is three times w 3');

    await assertAccessible(page, 'a dashboard');
    const png = await screenshot(page, 'dashboards');
    assert.ok(distinctPngBytes(png) > 16, 'the dashboard is blank');
    const chart = await widget(page, placed.perDay!).locator('.uplot').screenshot();
    assert.ok(distinctPngBytes(chart) > 16, 'the line chart is blank');
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dashboards-'));
    fs.writeFileSync(path.join(dir, 'dashboards.png'), png);
    console.log(`screenshot: ${path.join(dir, 'dashboards.png')}`);
  });

  it('moves and resizes by keyboard: each press is a PATCH of position, and the focus stays on the button', async () => {
    const page = await openOps();
    // The other widgets' charts are not drawn again when one widget moves: the same canvas stays.
    await page.evaluate(`document.querySelector('[data-widget="${placed.perDay}"] .uplot').dataset.mark = 'before'`);
    const right = widget(page, placed.open!).getByRole('button', { name: 'Move right: Open orders' });
    await right.focus();
    await page.keyboard.press('Enter');
    await page.getByRole('status').filter({ hasText: 'Open orders: column 2' }).waitFor();
    const read = async () => (await api.get(`${API}/dashboard_widgets/${placed.open}`)).body.data.attributes.position;
    assert.deepEqual(await read(), { x: 1, y: 0, w: 3, h: 2 });
    assert.equal(await widget(page, placed.perDay!).locator('.uplot[data-mark="before"]').count(), 1);
    // Evaluated in the page as text: this file is type-checked without the DOM's types.
    assert.equal(await page.evaluate('document.activeElement?.dataset.control'), 'right');
    await widget(page, placed.open!).getByRole('button', { name: 'Taller' }).focus();
    await page.keyboard.press('Space');
    await page.getByRole('status').filter({ hasText: 'Open orders: 3 rows high' }).waitFor();
    assert.deepEqual(await read(), { x: 1, y: 0, w: 3, h: 3 });
    // At the left edge a press changes nothing and says so.
    await widget(page, placed.byRegion!).getByRole('button', { name: 'Move left: Orders by region' }).press('Enter');
    await page.getByRole('status').filter({ hasText: 'already there' }).waitFor();
    assert.equal((await api.get(`${API}/dashboard_widgets/${placed.byRegion}`)).body.data.attributes.position.x, 0);
    const col = await page.evaluate(`getComputedStyle(document.querySelector('[data-widget="${placed.open}"]')).gridColumnStart`);
    assert.equal(col, '2');
    // Two quick presses, not waited for in between: each applies to the position the one before left.
    await widget(page, placed.open!).getByRole('button', { name: 'Move left: Open orders' }).press('Enter');
    await widget(page, placed.open!).getByRole('button', { name: 'Shorter' }).press('Enter');
    await page.getByRole('status').filter({ hasText: 'Open orders: 2 rows high' }).waitFor();
    assert.deepEqual(await read(), { x: 0, y: 0, w: 3, h: 2 });
  });

  it('places, edits and deletes a widget; a refused config keeps the form and says why', async () => {
    const page = await openOps();
    await page.getByRole('button', { name: 'Add widget' }).click();
    await page.getByLabel('Title').fill('Entities');
    await page.getByLabel('Kind').selectOption('number');
    await page.getByLabel('Config (JSON)').fill('{"bucket": "day"}');
    await page.getByRole('button', { name: 'Save widget' }).click();
    await page.getByRole('alert').filter({ hasText: 'a number widget shows one value' }).waitFor();
    await page.getByLabel('Config (JSON)').fill('');
    await page.getByRole('button', { name: 'Save widget' }).click();
    const added = page.locator('.widget', { has: page.getByRole('heading', { name: 'Entities' }) });
    await added
      .getByTestId('widget-number')
      .filter({ hasText: String(latest().length) })
      .waitFor();
    await assertAccessible(page, 'a dashboard with a new widget');

    await added.getByRole('button', { name: 'Edit Entities' }).click();
    await page.getByLabel('Title').fill('All orders');
    await page.getByRole('button', { name: 'Save widget' }).click();
    const edited = page.locator('.widget', { has: page.getByRole('heading', { name: 'All orders' }) });
    await edited.waitFor();

    await edited.getByRole('button', { name: 'Delete widget' }).click();
    const dialog = page.getByRole('dialog', { name: 'Delete the widget All orders?' });
    await assertAccessible(page, 'the delete dialog');
    await dialog.getByRole('button', { name: 'Delete widget' }).click();
    await edited.waitFor({ state: 'detached' });
    const left = (await api.get(`${API}/dashboard_widgets?filter[title]=All%20orders`)).body.data;
    assert.deepEqual(left, []);
  });

  it('reads its widgets again when the tab becomes visible again', async () => {
    const page = await openOps();
    let asked = 0;
    page.on('request', (r) => {
      if (r.url().endsWith('/api/graphql')) asked++;
    });
    await page.evaluate("document.dispatchEvent(new Event('visibilitychange'))");
    for (let i = 0; i < 50 && asked < 4; i++) await new Promise((r) => setTimeout(r, 100));
    assert.equal(asked, 4, 'each of the four widgets asked again');
  });
});

describe('facts: group by', { skip: BROWSER_SKIP }, () => {
  it('groups the latest facts by the fields picked, with a measure, as factAggregate answers', async () => {
    const page = await consoleAs(t, tenant);
    await page.goto(`${t.url}/console#/facts/${slug}`);
    await page.getByRole('link', { name: 'Group by' }).click();
    await page.getByRole('heading', { name: 'Groups of Orders' }).waitFor();
    await page.getByRole('checkbox', { name: 'region' }).check();
    await page.getByLabel('Measure').selectOption('sum:amount');
    await page.getByRole('button', { name: 'Show groups' }).click();
    await page.getByTestId('aggregate-table').locator('th', { hasText: 'sum_amount' }).waitFor();
    const rows = await page
      .getByTestId('aggregate-table')
      .locator('tbody tr')
      .evaluateAll((trs) => trs.map((tr) => [...tr.children].map((td) => td.textContent)));
    const plain = new Map<string, number>();
    for (const f of latest()) plain.set(f[4], (plain.get(f[4]) ?? 0) + f[2]);
    assert.deepEqual(new Map(rows.map((r) => [r[0]!, Number(r[1]!.replaceAll(',', ''))])), plain);
    assert.match(page.url(), /view=group&groupBy=region&measure=sum%3Aamount/);
    await assertAccessible(page, 'the group-by view');
    await screenshot(page, 'facts-group');
  });
});
