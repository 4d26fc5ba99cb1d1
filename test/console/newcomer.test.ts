/**
 * The console as a newcomer reads it: a webhook trigger names its service account and its
 * inbound connector (ids as secondary text); without a relay in the process it suggests the
 * `tributary relay` command, and with one (serve with RELAY_PORT) it shows that relay's URL,
 * which delivers; a multi-line expression diffs line by line; a failed run is replayed on the
 * current version by default (a succeeded one on its own); no page shows a backtick; the runs
 * table reads on a 390 px phone without sideways scrolling.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import type { Page } from 'playwright-core';
import { loadConfig } from '../../src/config.ts';
import { serve } from '../../src/server.ts';
import { freshPostgresDatabase, jsonApi, tokenFor, type TestApp } from '../helpers/app.ts';
import { BROWSER_SKIP, assertAccessible, browser, consoleAs, distinctPngBytes, screenshot, signIn } from '../helpers/browser.ts';
import { API, deliver, saveOk, startFlow, waitForRun, type Flow } from '../webhooks/helpers.ts';

const f: Flow = await startFlow({ WEBHOOK_RATE_LIMIT_MAX: '1000' });
const KEY = 'k'.repeat(40);
const inbound = await f.api.post(`${API}/external_connectors`, {
  data: { type: 'external_connector', attributes: { name: 'Shop signing key', auth_type: 'api_key', direction: 'inbound', secret: KEY } },
});
assert.equal(inbound.status, 201, inbound.text);
const connectorId: string = inbound.body.data.id;
const account = await f.api.get(`${API}/credentials/${f.tenant.credentialId}`);
assert.equal(account.status, 200, account.text);
const accountName: string = account.body.data.attributes.name;
assert.ok(accountName && accountName !== f.tenant.credentialId);

// JSONata over several lines, as people write it; version 2 changes one line of it.
const expression = (factor: string) =>
  ['(', '  $total := payload.total;', `  payload.fail ? $error("asked to fail") : {"id": payload.id, "total": $total${factor}}`, ')'].join('\n');
const stepsOf = (factor: string) => [{ key: 'shape', type: 'transform', config: { expression: expression(factor) } }];
const trigger = { key: 'shop', type: 'webhook', service_account_id: f.tenant.credentialId, inbound_connector_id: connectorId };
const first = await saveOk(f, { wf_params: { name: 'Orders', is_active: true }, step_params: stepsOf(''), trigger_params: [trigger] });
const workflowId: string = first.workflow.id;
const hookPath = `/api/v1/webhooks/${first.tokens.shop}`;

async function send(body: Record<string, unknown>): Promise<any> {
  const d = await deliver(f, hookPath, JSON.stringify(body), { 'x-api-key': KEY });
  assert.equal(d.status, 202, d.text);
  return waitForRun(f, d.body.workflow_run_id);
}
// Both on version 1; then version 2 becomes the current one.
const failed = await send({ id: 'o-1', total: 3, fail: true });
assert.equal(failed.attributes.status, 'failed');
const succeeded = await send({ id: 'o-2', total: 4 });
assert.equal(succeeded.attributes.status, 'succeeded');
const kept = first.workflow.attributes.triggers.map((t: any) => ({ id: t.id, ...trigger }));
const second = await saveOk(f, { workflow_id: workflowId, is_new_version: true, step_params: stepsOf(' * 2'), trigger_params: kept });
assert.equal(second.workflow.attributes.version, 2);

// serve with RELAY_PORT: the relay inside the process, its URL shown on the triggers card.
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tributary-relay-console-'));
// The relay on every address: the console names it by the host the browser used.
const env: Record<string, string> = { DATA_DIR: dataDir, PORT: '0', HOST: '127.0.0.1', RELAY_PORT: '0', RELAY_HOST: '0.0.0.0', LOG_LEVEL: 'silent' };
let drop: (() => Promise<void>) | undefined;
if (process.env.DATABASE_URL) {
  const fresh = await freshPostgresDatabase({ empty: true });
  env.DATABASE_URL = fresh.url;
  drop = fresh.drop;
}
const running = await serve(loadConfig(env), { http: true, worker: false });
after(async () => {
  await running.stop();
  await drop?.();
  fs.rmSync(dataDir, { recursive: true, force: true });
});

async function go(page: Page, hash: string): Promise<void> {
  await page.evaluate(`location.hash = ${JSON.stringify(hash)}`);
}

async function assertNoBacktick(page: Page, where: string): Promise<void> {
  // Folded parts count too: what a click shows is text a person reads.
  await page.evaluate(`document.querySelectorAll('details').forEach((d) => { d.open = true; })`);
  const text = await page.locator('body').innerText();
  assert.ok(!text.includes('`'), `a backtick in the text of ${where}: ${text.split('\n').find((l) => l.includes('`'))}`);
}

describe('the console for a newcomer', { skip: BROWSER_SKIP }, () => {
  it('names the trigger’s account and connector, and suggests a relay when none runs', async () => {
    const page = await consoleAs(f.t, f.tenant);
    const asked: string[] = [];
    page.on('response', (r) => /\/api\/json\/v1\/(credentials|external_connectors)/.test(r.url()) && asked.push(`${r.status()} ${new URL(r.url()).pathname}`));
    await go(page, `#/workflows/${workflowId}`);
    const card = page.locator('.wf-trigger-card').filter({ hasText: 'shop' });
    const accountCell = card.getByTestId('trigger-account');
    await accountCell.getByText(accountName, { exact: false }).waitFor();
    assert.match(await accountCell.innerText(), new RegExp(`^${accountName}\\s+${f.tenant.credentialId}$`));
    assert.equal(await accountCell.locator('[title]').getAttribute('title'), f.tenant.credentialId);
    const connectorCell = card.getByTestId('trigger-connector');
    assert.match(await connectorCell.innerText(), new RegExp(`^Shop signing key \\(api_key\\)\\s+${connectorId}$`));
    // One list call for each, answered: no read of each id.
    assert.deepEqual(asked.sort(), ['200 /api/json/v1/credentials', '200 /api/json/v1/external_connectors']);
    // This process runs no relay: the command to start one, and no relay URL.
    await card.getByLabel('Relay command for shop').waitFor();
    assert.match(await card.getByLabel('Relay command for shop').innerText(), /npx tributary relay$/);
    assert.equal(await card.getByLabel('Relay URL of shop').count(), 0);
    await assertAccessible(page, 'the triggers card');
    await assertNoBacktick(page, 'the workflow page');
  });

  it('shows a multi-line expression as lines in the version diff', async () => {
    const page = await consoleAs(f.t, f.tenant);
    await go(page, `#/workflows/${workflowId}?diff=1..2`);
    const diff = page.getByLabel('Steps, version 1 to 2');
    await diff.waitFor();
    const lines = (await diff.innerText()).split('\n').filter((l) => l !== '');
    assert.ok(!lines.some((l) => l.includes('\\n')), `an escaped newline in the diff: ${lines.join(' | ')}`);
    assert.deepEqual(lines, [
      '  - key: shape',
      '    type: transform',
      '    config:',
      '      expression: |-',
      '        (',
      '          $total := payload.total;',
      '−         payload.fail ? $error("asked to fail") : {"id": payload.id, "total": $total}',
      '+         payload.fail ? $error("asked to fail") : {"id": payload.id, "total": $total * 2}',
      '        )',
    ]);
    assert.match(await page.locator('.wf-diff').innerText(), /1 line added \(\+\), 1 line removed \(−\)/);
    // Monospace, whitespace kept.
    const style = await diff.locator('.diff-line.removed').evaluate((e) => {
      const css = e.ownerDocument.defaultView!;
      return [css.getComputedStyle(e).whiteSpace, css.getComputedStyle(e.parentElement!).fontFamily];
    });
    assert.equal(style[0], 'pre');
    assert.match(style[1]!, /mono/i);
    await assertAccessible(page, 'the version diff');
    await assertNoBacktick(page, 'the version diff');
  });

  it('replays a failed run on the current version by default, a succeeded one on its own', async () => {
    const page = await consoleAs(f.t, f.tenant);
    await go(page, `#/runs/${succeeded.id}`);
    const choice = page.getByLabel('Replay on');
    await page.getByTestId('run-status').getByText('succeeded').waitFor();
    assert.equal(await choice.inputValue(), 'original');

    await go(page, `#/runs/${failed.id}`);
    await page.getByTestId('run-status').getByText('failed').waitFor();
    assert.equal(await choice.inputValue(), 'current');
    assert.deepEqual(await choice.locator('option').allInnerTexts(), ['Original version (v1)', 'Current version (v2)']);
    await assertAccessible(page, 'a failed run');
    await assertNoBacktick(page, 'a failed run');
    const sent: Array<Record<string, unknown>> = [];
    page.on('request', (r) => r.method() === 'POST' && r.url().endsWith(`/workflow_runs/${failed.id}/replay`) && sent.push(r.postDataJSON()));
    await page.getByRole('button', { name: 'Replay', exact: true }).click();
    await page.waitForURL((url) => /#\/runs\/[0-9a-f-]{36}$/.test(url.hash) && !url.hash.includes(failed.id));
    const replayId = /#\/runs\/([0-9a-f-]{36})$/.exec(page.url())![1]!;
    assert.notEqual(replayId, failed.id);
    assert.deepEqual(sent, [{ meta: { version: 'current' } }]);
    const replay = await waitForRun(f, replayId);
    assert.equal(replay.attributes.workflow_version, 2);
    assert.equal(replay.attributes.replay_of, failed.id);
  });

  it('shows no backtick on the other pages', async () => {
    const page = await consoleAs(f.t, f.tenant);
    for (const [hash, heading] of [
      ['#/runs', 'Runs'],
      ['#/workflows', 'Workflows'],
      ['#/connectors', 'Connectors'],
      [`#/connectors/${connectorId}`, 'Shop signing key'],
      ['#/facts', 'Facts'],
    ] as const) {
      await go(page, hash);
      await page.getByRole('heading', { level: 1, name: heading }).waitFor();
      // The lists fill in after the heading.
      await page.waitForLoadState('networkidle');
      await assertNoBacktick(page, hash);
    }
  });

  it('keeps the runs table readable at 390 px: no sideways page scroll, status, workflow and time in view', async () => {
    const context = await (await browser()).newContext({ viewport: { width: 390, height: 844 } });
    after(() => context.close());
    const page = await context.newPage();
    await page.goto(`${f.t.url}/console`);
    await signIn(page, f.tenant);
    await go(page, '#/runs');
    const row = page.getByRole('row').filter({ has: page.getByRole('link', { name: `Run ${failed.id}`, exact: true }) });
    await row.waitFor();
    assert.ok((await page.evaluate<number>('document.documentElement.scrollWidth')) <= 390, 'the page scrolls sideways');
    assert.ok((await page.evaluate<number>('document.body.scrollWidth')) <= 390, 'the body scrolls sideways');
    // Every cell of the row is on screen, labelled by its column; the key ones among them.
    const cells = row.getByRole('cell');
    assert.equal(await cells.count(), 8);
    for (const [label, text] of [
      ['Workflow', /^Orders v1$/],
      ['Status', /failed/],
      ['Inserted', /\d/],
    ] as const) {
      const cell = row.locator(`td[data-label="${label}"]`);
      assert.ok(await cell.isVisible(), `${label} hidden`);
      assert.match(await cell.innerText(), text);
      // Its column's title before it, as the stacked layout writes it.
      assert.equal(await cell.evaluate((e) => e.ownerDocument.defaultView!.getComputedStyle(e, '::before').content), `"${label}"`);
      const box = (await cell.boundingBox())!;
      assert.ok(box.x >= 0 && box.x + box.width <= 390, `${label} is outside the screen: ${JSON.stringify(box)}`);
    }
    await assertAccessible(page, 'the runs list at 390 px');
    assert.ok(distinctPngBytes(await screenshot(page, 'runs-phone')) > 16);
  });
});

describe('the relay inside serve, in the console', { skip: BROWSER_SKIP }, () => {
  it('shows the running relay’s URL instead of a command, and that URL delivers', async () => {
    assert.ok(running.relay, 'serve started no relay');
    const config = await fetch(`${running.url}/console/config.json`);
    assert.equal(config.status, 200);
    assert.match(config.headers.get('content-security-policy') ?? '', /default-src 'none'/);
    const relayPort = new URL(running.relay.url).port;
    assert.deepEqual(await config.json(), { relay: { url: `http://127.0.0.1:${relayPort}` } });
    // Asked by another name (a browser on another machine), the relay is named the same way.
    const asked = await new Promise<string>((resolve, reject) => {
      const req = http.get(`${running.url}/console/config.json`, { headers: { host: 'tributary.example:8080' } }, (res) => {
        let body = '';
        res.on('data', (b: Buffer) => (body += b.toString()));
        res.on('end', () => resolve(body));
      });
      req.on('error', reject);
    });
    assert.deepEqual(JSON.parse(asked), { relay: { url: `http://tributary.example:${relayPort}` } });

    const boot = JSON.parse(fs.readFileSync(path.join(dataDir, 'bootstrap.json'), 'utf8')) as Record<string, string>;
    const tenant = { clientId: boot.client_id!, clientSecret: boot.client_secret! };
    const t = { url: running.url, deps: running.deps } as TestApp;
    const bearer = await tokenFor(t, tenant);
    const api = jsonApi(t, bearer);
    const c = await api.post(`${API}/external_connectors`, {
      data: { type: 'external_connector', attributes: { name: 'Stripe key', auth_type: 'api_key', direction: 'inbound', secret: KEY } },
    });
    assert.equal(c.status, 201, c.text);
    const relayFlow = { t, api, bearer, tenant: { ...tenant, organizationId: boot.organization_id!, credentialId: boot.credential_id! } } as unknown as Flow;
    const saved = await saveOk(relayFlow, {
      wf_params: { name: 'Relayed', is_active: true },
      step_params: [{ key: 'note', type: 'transform', config: { expression: 'payload' } }],
      trigger_params: [{ key: 'stripe', type: 'webhook', service_account_id: boot.credential_id, inbound_connector_id: c.body.data.id }],
    });

    const page = await consoleAs(t, tenant);
    await go(page, `#/workflows/${saved.workflow.id}`);
    const shown = page.getByLabel('Relay URL of stripe');
    await shown.waitFor();
    assert.equal(await shown.innerText(), `http://127.0.0.1:${relayPort}/hooks/<token>`);
    assert.equal(await page.getByLabel('Relay command for stripe').count(), 0);
    assert.ok(!(await page.locator('body').innerText()).includes('npx tributary relay'));
    await assertAccessible(page, 'a trigger with the relay running');
    await assertNoBacktick(page, 'a trigger with the relay running');
    assert.ok(distinctPngBytes(await screenshot(page, 'workflow-triggers-relay', { selector: '.section:has(.wf-triggers)' })) > 16);

    // The URL shown, with the token the save answered, takes a provider's delivery.
    const res = await fetch((await shown.innerText()).replace('<token>', saved.tokens.stripe!), {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': KEY },
      body: '{"id":"evt_1"}',
    });
    assert.equal(res.status, 202, await res.text());
  });
});
