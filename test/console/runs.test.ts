/**
 * The console's Runs pages against a real server and worker: a signed delivery's run appears
 * in the open list without a reload and changes there as it runs; a status filter chosen in
 * the form lives in the address; a run shows each step's output, the context it read and the
 * delivery's headers with the signature redacted; a replay by keyboard lands on the new run;
 * a filtered list is replayed in bulk, an unfiltered one refused; no secret is rendered.
 */
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { after, describe, it } from 'node:test';
import type { Page } from 'playwright-core';
import { signatureHeaders } from '../../src/connectors/signature-schemes.ts';
import { BROWSER_SKIP, assertAccessible, distinctPngBytes, openConsole, screenshot, signIn } from '../helpers/browser.ts';
import { API, createModel, deliver, saveOk, startFlow, waitForRun, type Flow } from '../webhooks/helpers.ts';
import { otlpReceiver } from '../helpers/otlp-receiver.ts';

// Traced, so that a run page has a trace id to show.
const collector = await otlpReceiver();
after(() => collector.close());
const f: Flow = await startFlow({ WEBHOOK_RATE_LIMIT_MAX: '1000', OTEL_EXPORTER_OTLP_ENDPOINT: collector.url });
const SIGNING_SECRET = randomBytes(20).toString('hex');
await createModel(f, 'orders', [
  { name: 'order_id', type: 'string' },
  { name: 'amount', type: 'float', is_required: true },
]);
const inbound = await f.api.post(`${API}/external_connectors`, {
  data: {
    type: 'external_connector',
    attributes: { name: 'shop', auth_type: 'hmac', direction: 'inbound', secret: SIGNING_SECRET, config: { signature_scheme: 'github' } },
  },
});
assert.equal(inbound.status, 201, inbound.text);
const { tokens } = await saveOk(f, {
  wf_params: { name: 'Orders', is_active: true },
  step_params: [
    { key: 'shape', type: 'transform', config: { expression: 'payload.fail ? $error("asked to fail") : {"id": payload.id, "total": payload.total}' } },
    { key: 'paid', type: 'condition', config: { expression: 'steps.shape.total > 0' } },
    { key: 'store', type: 'write_fact', config: { data_model_slug: 'orders', mapping: { order_id: 'steps.shape.id', amount: 'steps.shape.total' } } },
  ],
  trigger_params: [{ key: 'shop', type: 'webhook', service_account_id: f.tenant.credentialId, inbound_connector_id: inbound.body.data.id }],
});
const hookPath = `/api/v1/webhooks/${tokens.shop}`;

/** A delivery signed as GitHub signs it; the run's id. */
async function send(body: Record<string, unknown>): Promise<string> {
  const text = JSON.stringify(body);
  const d = await deliver(f, hookPath, text, signatureHeaders('github', SIGNING_SECRET, text, randomUUID(), Math.floor(Date.now() / 1000)));
  assert.equal(d.status, 202, d.text);
  return d.body.workflow_run_id;
}

function assertNoSecret(html: string, where: string): void {
  const secrets = { 'client secret': f.tenant.clientSecret, 'trigger token': tokens.shop!, bearer: f.bearer, 'signing secret': SIGNING_SECRET };
  for (const [name, value] of Object.entries(secrets)) assert.ok(!html.includes(value), `the ${name} is rendered on ${where}`);
}

const runLink = (page: Page, id: string) => page.getByRole('link', { name: `Run ${id}`, exact: true });
const rowOf = (page: Page, id: string) => page.getByRole('row').filter({ has: runLink(page, id) });

let page: Page;
let okRun: string;
let failedRun: string;

describe('runs pages', { skip: BROWSER_SKIP }, () => {
  it('shows a delivery’s run in the open list without reloading, and its changes as it runs', async () => {
    page = await openConsole(f.t);
    // Signed in by keyboard: Enter in the secret's field submits.
    await page.getByLabel('Client id').fill(f.tenant.clientId);
    await page.getByLabel('Client secret').fill(f.tenant.clientSecret);
    await page.getByLabel('Client secret').press('Enter');
    await page.getByRole('heading', { level: 1, name: 'Runs' }).waitFor();
    await page.getByText('No run matches yet').waitFor();
    // A reload would lose this mark (and the sign-in, which lives in memory).
    await page.evaluate('window.mark = 1');

    okRun = await send({ id: 'o-1', total: 12.5 });
    await rowOf(page, okRun).getByText('succeeded').waitFor();
    failedRun = await send({ id: 'o-2', total: 3, fail: true });
    await rowOf(page, failedRun).getByText('failed').first().waitFor();

    assert.equal(await page.evaluate('window.mark'), 1, 'the page was reloaded');
    const okRow = await rowOf(page, okRun).innerText();
    assert.match(okRow, /Orders/);
    assert.match(okRow, /shop/);
    assert.match(okRow, /1\/5/);
    // Newest first.
    const links = await page.locator('tbody a[aria-label^="Run "]').evaluateAll((as) => as.map((a) => a.getAttribute('aria-label')));
    assert.deepEqual(links, [`Run ${failedRun}`, `Run ${okRun}`]);
    await assertAccessible(page, 'the runs list');
    assert.ok(distinctPngBytes(await screenshot(page, 'runs-list')) > 16);
    assertNoSecret(await page.content(), 'the runs list');
  });

  it('filters by status in the form and keeps the filter in the address', async () => {
    // By keyboard: a letter picks the first option it starts.
    await page.getByLabel('Status').focus();
    await page.keyboard.press('f');
    await page.waitForURL(/#\/runs\?status=failed$/);
    await runLink(page, okRun).waitFor({ state: 'detached' });
    await runLink(page, failedRun).waitFor();

    // The address is the view: opened elsewhere (and signed in there), it shows the same list.
    const other = await openConsole(f.t);
    await other.goto(`${f.t.url}/console#/runs?status=failed`);
    await signIn(other, f.tenant);
    await runLink(other, failedRun).waitFor();
    assert.equal(await other.getByLabel('Status').inputValue(), 'failed');
    assert.equal(await runLink(other, okRun).count(), 0);
    // The workflow by name, and a time range that ends before the runs began.
    await other.getByLabel('Workflow').selectOption({ label: 'Orders' });
    await other.waitForURL(/workflow=[0-9a-f-]{36}/);
    await runLink(other, failedRun).waitFor();
    await other.getByLabel('Inserted until').fill('2020-01-01T00:00');
    await other.waitForURL(/until=20(19|20)-/);
    await other.getByText('No run matches yet').waitFor();
    await other.context().close();
  });

  it('opens a run by keyboard and shows each step, its output, the context it read and the delivery', async () => {
    await page.getByLabel('Status').selectOption('');
    await runLink(page, okRun).focus();
    await page.keyboard.press('Enter');
    await page.waitForURL(new RegExp(`#/runs/${okRun}$`));
    await page.getByRole('heading', { level: 1, name: `Run ${okRun.split('-').at(-1)}` }).waitFor();
    for (const [i, key] of ['shape', 'paid', 'store'].entries()) await page.getByRole('heading', { level: 3, name: `${i + 1}. ${key}` }).waitFor();

    assert.deepEqual(JSON.parse(await page.getByLabel('Output of shape', { exact: true }).innerText()), { id: 'o-1', total: 12.5 });
    assert.equal(await page.getByLabel('Output of paid', { exact: true }).innerText(), 'true');
    assert.match(await page.getByLabel('Output of store', { exact: true }).innerText(), /"written": 1/);
    await page.getByText('write fact').waitFor();
    // Each step says which attempt ran it (one attempt here, so no count).
    assert.deepEqual(await page.getByTestId('step-attempts').allInnerTexts(), ['attempt 1', 'attempt 1', 'attempt 1']);
    await page.getByText('This run has not been replayed.').waitFor();
    await page.evaluate('scrollTo(0, 0)');
    assert.ok(distinctPngBytes(await screenshot(page, 'run-page')) > 16);
    // The store step read the payload and the earlier outputs (rebuilt, labelled so).
    await page.getByText('Context it read').nth(2).click();
    const context = JSON.parse(await page.getByLabel('Context store read', { exact: true }).innerText());
    assert.deepEqual(context.payload, { id: 'o-1', total: 12.5 });
    assert.deepEqual(Object.keys(context.steps), ['shape', 'paid']);

    const headers = page.getByRole('table', { name: /Delivery headers/ });
    assert.match(await headers.getByRole('row').filter({ hasText: 'x-hub-signature-256' }).innerText(), /\[redacted\]/);
    assert.match(await headers.getByRole('row').filter({ hasText: 'x-github-delivery' }).innerText(), /[0-9a-f-]{36}/);
    await page.getByRole('link', { name: 'Orders' }).waitFor();
    const traceId = (await f.api.get(`${API}/workflow_runs/${okRun}`)).body.data.attributes.trace_id;
    assert.match(traceId, /^[0-9a-f]{32}$/);
    assert.equal(await page.getByTestId('trace-id').innerText(), traceId);
    await assertAccessible(page, 'the run page');
    assertNoSecret(await page.content(), 'the run page');
  });

  it('replays the run by keyboard and lands on the new run, a replay of the original', async () => {
    await page.getByLabel('Replay on').focus();
    await page.keyboard.press('Tab');
    assert.equal(await page.evaluate('document.activeElement.textContent'), 'Replay');
    await page.keyboard.press('Enter');
    const original = page.getByRole('link', { name: `Original run ${okRun}` });
    await original.waitFor();
    const replayId = /#\/runs\/([0-9a-f-]{36})$/.exec(page.url())?.[1];
    assert.ok(replayId && replayId !== okRun, page.url());
    const replay = await waitForRun(f, replayId);
    assert.equal(replay.attributes.replay_of, okRun);
    await page.getByTestId('run-status').getByText('succeeded').waitFor();

    // The original lists it.
    await original.focus();
    await page.keyboard.press('Enter');
    await page.waitForURL(new RegExp(`#/runs/${okRun}$`));
    await page
      .getByRole('table', { name: /Replays of this run/ })
      .getByRole('link', { name: `Run ${replayId}` })
      .waitFor();
    assertNoSecret(await page.content(), 'the replayed run');
  });

  it('replays a filtered list in bulk after a confirmation, and refuses an unfiltered one', async () => {
    await page.getByRole('link', { name: 'Runs', exact: true }).click();
    await page.getByLabel('Status').selectOption('failed');
    await page.waitForURL(/status=failed/);
    await runLink(page, failedRun).waitFor();
    await page.getByRole('button', { name: 'Replay these runs…' }).click();
    assert.equal(await page.getByTestId('bulk-at-most').innerText(), '1');
    await page.getByLabel('Version').selectOption('current');
    const sent: string[] = [];
    const count = (r: { method(): string; url(): string }) => {
      if (r.method() === 'POST' && /\/workflow_runs\/replay\?/.test(r.url())) sent.push(r.url());
    };
    page.on('request', count);
    await page.getByRole('button', { name: 'Replay at most 1' }).focus();
    // A double click in one task, before any render could disable the button: one request.
    await page.evaluate('document.activeElement.click(); document.activeElement.click()');
    const done = page.getByRole('status').filter({ hasText: 'Replayed' });
    await done.waitFor();
    page.off('request', count);
    assert.equal(sent.length, 1, sent.join('\n'));
    assert.match(await done.innerText(), /Replayed 1 run\. No more runs match\./);
    // The replay fails as its original did, and joins the live list.
    const replays = await f.api.get(`${API}/workflow_runs?filter[replay_of]=${failedRun}`);
    assert.equal(replays.body.data.length, 1, replays.text);
    await rowOf(page, replays.body.data[0].id).getByText('failed').first().waitFor();

    await page.getByRole('link', { name: 'Clear filters' }).click();
    await page.waitForURL(/#\/runs$/);
    await page.getByRole('button', { name: 'Replay these runs…' }).click();
    assert.match(await page.getByRole('alert').innerText(), /Set a filter first/);
    assertNoSecret(await page.content(), 'the bulk replay');
  });

  it('asks nothing while the tab is hidden, and catches up when it is shown', async () => {
    const polls: string[] = [];
    page.on('request', (r) => r.url().includes('updated_at') && polls.push(r.url()));
    await page.evaluate(`Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => 'hidden' });
      document.dispatchEvent(new Event('visibilitychange'))`);
    const before = polls.length;
    const hiddenRun = await send({ id: 'o-3', total: 4 });
    await waitForRun(f, hiddenRun);
    assert.equal(polls.length, before, `asked while hidden: ${polls.slice(before).join(', ')}`);
    assert.equal(await runLink(page, hiddenRun).count(), 0);
    await page.evaluate(`Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => 'visible' });
      document.dispatchEvent(new Event('visibilitychange'))`);
    await rowOf(page, hiddenRun).getByText('succeeded').waitFor();
    // The poll sends the list's filters and the newest change seen.
    assert.match(decodeURIComponent(polls.at(-1)!), /filter\[updated_at\]\[gt\]=\d{4}-\d\d-\d\dT/);
  });

  it('pages with the API’s cursors', async () => {
    // 25 a page: with the runs so far, 26 more make sure there is a second page.
    const made = await Promise.all(Array.from({ length: 26 }, (_, i) => send({ id: `p-${i}`, total: 1 })));
    const first = page.getByRole('table').locator('tbody a[aria-label^="Run "]').first();
    await page.getByRole('button', { name: 'Next →' }).waitFor();
    await runLink(page, made.at(-1)!).or(runLink(page, made[0]!)).first().waitFor();
    const newest = await first.getAttribute('aria-label');
    await page.getByRole('button', { name: 'Next →' }).focus();
    await page.keyboard.press('Enter');
    await runLink(page, okRun).waitFor();
    assert.notEqual(await first.getAttribute('aria-label'), newest);
    await page.getByRole('button', { name: '← Previous' }).click();
    await page.locator(`tbody a[aria-label="${newest}"]`).waitFor();
    await assertAccessible(page, 'a page of runs');
  });
});
