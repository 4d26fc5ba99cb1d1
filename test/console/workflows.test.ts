/**
 * The console's workflow pages: the list, one workflow's flow at each saved version, the
 * difference of two versions, trigger URLs without their tokens, and a test run from a pasted
 * payload (bad JSON refused before any request).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Page } from 'playwright-core';
import { BROWSER_SKIP, assertAccessible, consoleAs, distinctPngBytes, screenshot } from '../helpers/browser.ts';
import { createModel, deliver, saveOk, startFlow } from '../webhooks/helpers.ts';

const f = await startFlow({}, {});
await createModel(f, 'orders', [
  { name: 'order_id', type: 'string' },
  { name: 'amount', type: 'float' },
]);
const steps = (expression: string) => [
  { key: 'shape', type: 'transform', config: { expression } },
  { key: 'paid', type: 'condition', config: { expression: 'steps.shape.amount > 0' } },
  { key: 'store', type: 'write_fact', config: { data_model_slug: 'orders', data: 'steps.shape' } },
];
const V1 = "{ 'order_id': payload.data.id, 'amount': payload.data.amount }";
const V2 = "{ 'order_id': payload.data.id, 'amount': payload.data.amount * 2 }";
const first = await saveOk(f, {
  step_params: steps(V1),
  trigger_params: [
    { key: 'hook', type: 'webhook', service_account_id: f.tenant.credentialId },
    { key: 'nightly', type: 'schedule', cron: '0 3 * * *', timezone: 'Europe/Berlin' },
  ],
});
const id: string = first.workflow.id;
const kept = first.workflow.attributes.triggers.map((t: any) =>
  t.type === 'webhook'
    ? { id: t.id, key: t.key, type: t.type, service_account_id: t.service_account_id }
    : { id: t.id, key: t.key, type: t.type, cron: t.cron, timezone: t.timezone },
);
const second = await saveOk(f, { workflow_id: id, is_new_version: true, step_params: steps(V2), trigger_params: kept });
assert.equal(second.workflow.attributes.version, 2);
// Enough more workflows for a second page of the list (25 a page), named to sort after Orders.
for (let i = 1; i <= 26; i++)
  await saveOk(f, { wf_params: { name: `Zz ${String(i).padStart(2, '0')}`, is_active: false }, step_params: steps(V1).slice(0, 1), trigger_params: [] });
const secrets = [f.tenant.clientSecret, ...Object.values(first.tokens)];
assert.equal(Object.keys(first.tokens).length, 1);

/** Goes to a route of the console without reloading (a reload signs out). */
async function go(page: Page, hash: string): Promise<void> {
  await page.evaluate(`location.hash = ${JSON.stringify(hash)}`);
}

function assertNoSecret(html: string): void {
  for (const s of secrets) assert.ok(!html.includes(s), 'a secret is rendered');
}

describe('workflows in the console', { skip: BROWSER_SKIP }, () => {
  it('lists the workflow and opens it by keyboard', async () => {
    const page = await consoleAs(f.t, f.tenant);
    await page.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name: 'Workflows' }).click();
    const link = page.getByRole('link', { name: 'Orders', exact: true });
    await link.waitFor();
    const row = page.getByRole('row').filter({ has: link });
    assert.match(await row.innerText(), /active\s+2\s+2: 1 webhook, 1 schedule/);
    await assertAccessible(page, 'the workflows list');
    assert.ok(distinctPngBytes(await screenshot(page, 'workflows-list')) > 16);
    // Pages: 25 a page, Next and Previous.
    assert.equal(await page.getByRole('link', { name: /^Zz / }).count(), 24);
    const pager = page.getByRole('navigation', { name: 'Workflow pages' });
    await pager.getByRole('button', { name: /Next/ }).click();
    await page.getByRole('link', { name: 'Zz 26' }).waitFor();
    assert.equal(await page.getByRole('link', { name: /^(Zz |Orders)/ }).count(), 2);
    assert.ok(await pager.getByRole('button', { name: /Next/ }).isDisabled());
    await pager.getByRole('button', { name: /Previous/ }).click();
    await link.waitFor();
    await link.focus();
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { level: 1, name: 'Orders' }).waitFor();
    assertNoSecret(await page.content());
  });

  it('draws the flow of each version, one node per step and trigger, with the same as a list', async () => {
    const page = await consoleAs(f.t, f.tenant);
    await go(page, `#/workflows/${id}`);
    const svg = page.getByRole('img', { name: /Flow of version 2/ });
    await svg.waitFor();
    const list = page.getByRole('list', { name: 'Flow of version 2, in order' });
    const items = list.getByRole('listitem');
    assert.deepEqual(
      (await items.allInnerTexts()).map((s) => s.trim()),
      [
        'Trigger hook: webhook',
        'Trigger nightly: schedule (0 3 * * *)',
        'Step 1: shape, transform',
        'Step 2: paid, condition — a false value stops the run here; later steps are skipped',
        'Step 3: store, write fact',
      ],
    );
    // The SVG draws the same nodes: a box per trigger and per step.
    assert.equal(await page.locator('svg.wf-flow .wf-trigger').count(), 2);
    assert.equal(await page.locator('svg.wf-flow .wf-step').count(), 3);
    assert.match((await page.locator('svg.wf-flow desc').textContent()) ?? '', /paid \(condition\), where a false value stops the run/);
    // By keyboard: focusing a step in the list shows its config.
    await list.getByRole('button', { name: 'Step 1: shape, transform' }).focus();
    const config = page.getByLabel('Config of step shape');
    await config.waitFor();
    assert.match(await config.innerText(), /payload\.data\.amount \* 2/);
    await page.keyboard.press('Tab');
    await page.getByLabel('Config of step paid').waitFor();
    // Schedules show their next fire; webhooks their URL with the token as a placeholder.
    assert.match(await page.getByText('Next fire').locator('xpath=following-sibling::dd[1]').innerText(), /\d/);
    assert.equal(await page.getByText('Bodies').locator('xpath=following-sibling::dd[1]').innerText(), 'JSON (accept: json)');
    const url = await page.getByLabel('Ingestion URL of hook').innerText();
    assert.equal(url, `${f.t.url}/api/v1/webhooks/<token>`);
    assert.match(await page.getByLabel('Relay command for hook').innerText(), /RELAY_TARGET_URL=.*\n.*RELAY_CREDENTIALS_FILE=.*\n[\s\S]*npx tributary relay/);
    assert.match(await page.locator('body').innerText(), /stored hashed/);
    await assertAccessible(page, 'the workflow page');
    assert.ok(distinctPngBytes(await screenshot(page, 'workflow-flow')) > 16);
    assert.ok(distinctPngBytes(await screenshot(page, 'workflow-triggers', { selector: '.section:has(.wf-triggers)' })) > 16);
    assertNoSecret(await page.content());

    // The version picker shows the steps of version 1.
    await page.getByRole('combobox', { name: 'Version' }).first().selectOption('1');
    await page.getByRole('list', { name: 'Flow of version 1, in order' }).waitFor();
    await page.getByRole('button', { name: 'Step 1: shape, transform' }).click();
    assert.doesNotMatch(await page.getByLabel('Config of step shape').innerText(), /\* 2/);
  });

  it('shows the difference of two versions with + and −', async () => {
    const page = await consoleAs(f.t, f.tenant);
    await go(page, `#/workflows/${id}`);
    await page.getByRole('combobox', { name: 'From version' }).selectOption('1');
    await page.getByRole('combobox', { name: 'To version' }).selectOption('2');
    await page.getByRole('button', { name: 'Compare' }).click();
    const diff = page.getByLabel('Steps, version 1 to 2');
    await diff.waitFor();
    assert.ok(page.url().endsWith(`#/workflows/${id}?diff=1..2`), page.url());
    const lines = (await diff.innerText()).split('\n');
    const removed = lines.filter((l) => l.startsWith('−'));
    const added = lines.filter((l) => l.startsWith('+'));
    assert.deepEqual(removed, [`−     expression: ${JSON.stringify(V1)}`]);
    assert.deepEqual(added, [`+     expression: ${JSON.stringify(V2)}`]);
    assert.ok(lines.some((l) => l.includes('key: paid') && l.startsWith(' ')));
    assert.match(await page.locator('.wf-diff > p').innerText(), /1 line added \(\+\), 1 line removed \(−\)/);
    await assertAccessible(page, 'the version diff');
    assert.ok(distinctPngBytes(await screenshot(page, 'workflow-diff', { selector: '.section:has(.wf-diff)' })) > 16);
  });

  it('test-runs a pasted payload, refusing bad JSON without a request', async () => {
    const page = await consoleAs(f.t, f.tenant);
    const testRuns: string[] = [];
    page.on('request', (r) => r.url().includes('/test_run') && testRuns.push(r.url()));
    await go(page, `#/workflows/${id}`);
    const payload = page.getByLabel('Sample payload (JSON)');
    await payload.fill('{"data": {"id": "o-1", "amount": }}');
    const run = page.getByRole('button', { name: 'Run test' });
    await run.click();
    const problem = page.getByRole('alert');
    await problem.waitFor();
    assert.match(await problem.innerText(), /^The payload is not valid JSON: .+\. Nothing was sent\.$/);
    assert.deepEqual(testRuns, []);

    await payload.fill('{"data": {"id": "o-1", "amount": 12.5}}');
    await page.getByRole('combobox', { name: 'Calls' }).selectOption('none');
    // By keyboard only: focus the button and press Enter.
    await run.focus();
    await page.keyboard.press('Enter');
    const result = page.getByRole('region', { name: /Result of version 2/ });
    await result.waitFor();
    assert.equal(testRuns.length, 1);
    assert.equal(await page.getByRole('alert').count(), 0);
    assert.match(await result.innerText(), /Facts it would write: 1/);
    const shape = JSON.parse(await page.getByLabel('Output of step shape').innerText());
    assert.deepEqual(shape, { order_id: 'o-1', amount: 25 });
    assert.equal(JSON.parse(await page.getByLabel('Output of step paid').innerText()), true);
    const facts = JSON.parse(await page.getByLabel('Facts step store would write').innerText());
    assert.equal(facts.length, 1);
    assert.deepEqual(facts[0].data, { order_id: 'o-1', amount: 25 });
    const store = page.getByRole('article', { name: /^3\. store/ });
    assert.equal(await store.getByText('succeeded', { exact: true }).count(), 1);
    await assertAccessible(page, 'the test-run result');
    assert.ok(distinctPngBytes(await screenshot(page, 'workflow-test-run', { selector: '.section:has(.wf-test-run)' })) > 16);

    // A fact the data model refuses: the step fails and names the problem by its pointer.
    await payload.fill('{"data": {"id": 7, "amount": 3}}');
    await run.click();
    await store.getByText('failed', { exact: true }).waitFor();
    const problems = store.getByRole('table', { name: 'Problems of step store' });
    assert.match(await problems.innerText(), /\/data\/order_id/);
    await assertAccessible(page, 'a test run with problems');
    assertNoSecret(await page.content());
  });

  it("starts the sample from the last delivery's payload and headers; a failure clears the previous result", async () => {
    const gh = await saveOk(f, {
      wf_params: { name: 'GitHub pushes', is_active: true },
      step_params: [
        { key: 'is_push', type: 'condition', config: { expression: 'delivery.headers."x-github-event" = "push"' } },
        { key: 'seen', type: 'transform', config: { expression: '{"event": delivery.headers."x-github-event", "id": delivery.id, "ref": payload.ref}' } },
      ],
    });
    const hook = `/api/v1/webhooks/${gh.tokens.hook}`;
    const older = await deliver(f, hook, JSON.stringify({ ref: 'refs/heads/old' }), { 'x-github-event': 'ping', 'idempotency-key': 'gh-old' });
    assert.equal(older.status, 202, older.text);
    const last = await deliver(f, hook, JSON.stringify({ ref: 'refs/heads/main' }), { 'x-github-event': 'push', 'idempotency-key': 'gh-last' });
    assert.equal(last.status, 202, last.text);
    secrets.push(gh.tokens.hook!);

    const page = await consoleAs(f.t, f.tenant);
    await go(page, `#/workflows/${gh.workflow.id}`);
    await page.getByText(/^The sample is the last delivery \(run /).waitFor();
    const payload = page.getByLabel('Sample payload (JSON)');
    assert.deepEqual(JSON.parse(await payload.inputValue()), { ref: 'refs/heads/main' });
    const headers = (await page.getByLabel('Sample headers').inputValue()).split('\n');
    assert.ok(headers.includes('x-github-event: push'), headers.join('\n'));
    assert.ok(headers.includes('authorization: [redacted]'), 'the run shows it redacted; the test run leaves it out');
    assert.equal(await page.getByLabel('Delivery id').inputValue(), 'gh-last');
    assertNoSecret(await page.content());

    const run = page.getByRole('button', { name: 'Run test' });
    await run.click();
    const result = page.getByRole('region', { name: /Result of version 1/ });
    await result.waitFor();
    assert.deepEqual(JSON.parse(await page.getByLabel('Output of step seen').innerText()), { event: 'push', id: 'gh-last', ref: 'refs/heads/main' });
    await assertAccessible(page, 'a test run of the last delivery');

    // The server refuses (a delivery id over 1,024 characters): the earlier success is gone.
    await page.getByLabel('Delivery id').fill('d'.repeat(2000));
    await run.click();
    await page.getByText('The test run failed').waitFor();
    assert.equal(await result.count(), 0, 'the previous result stays on screen beside the error');
    // A success again, then a mistake caught before any request: gone as well.
    await page.getByLabel('Delivery id').fill('gh-last');
    await run.click();
    await result.waitFor();
    await page.getByLabel('Sample headers').fill('x-github-event push');
    await run.click();
    const problem = page.getByRole('alert');
    await problem.waitFor();
    assert.match(await problem.innerText(), /^Line 1 of the headers is not "Name: value"\. Nothing was sent\.$/);
    assert.equal(await result.count(), 0);
  });

  it('starts from the template when the workflow has no delivery', async () => {
    const page = await consoleAs(f.t, f.tenant);
    await go(page, `#/workflows/${id}`);
    await page.getByText(/^The sample is the template/).waitFor();
    assert.deepEqual(JSON.parse(await page.getByLabel('Sample payload (JSON)').inputValue()), { data: { id: 'o-1', amount: 12.5 } });
    assert.equal(await page.getByLabel('Sample headers').inputValue(), '');
  });
});
