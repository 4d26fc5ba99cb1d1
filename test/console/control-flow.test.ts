/**
 * The console and control flow, in Chromium against a real server and worker: a saved
 * workflow's flow draws a switch's cases and default, a for_each's loop and its waits; a run
 * shows its nested records (the switch's branch and steps, the for_each's items) and, parked
 * on a delay, when it resumes and what it waits for; Cancel (confirmed in a dialog) leaves it
 * cancelled; a failed run shows its on_failure steps apart. The runs list filters waiting and
 * cancelled runs. Every page is axe clean.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import type { Page } from 'playwright-core';
import { BROWSER_SKIP, assertAccessible, consoleAs } from '../helpers/browser.ts';
import { ROOT } from '../helpers/cli.ts';
import { API, deliver, saveOk, startFlow } from '../webhooks/helpers.ts';

const f = await startFlow({ WORKER_POLL_MS: '20', WEBHOOK_RATE_LIMIT_MAX: '1000' });
const hook = { key: 'hook', type: 'webhook', service_account_id: f.tenant.credentialId };
const orders = { key: 'orders', type: 'webhook', service_account_id: f.tenant.credentialId };
const { workflow, tokens } = await saveOk(f, {
  wf_params: { name: 'Router', is_active: true },
  trigger_params: [hook, orders],
  step_params: [
    {
      key: 'route',
      type: 'switch',
      config: {
        cases: [
          { when: 'payload.kind = "push"', steps: [{ key: 'on_push', type: 'transform', config: { expression: '{"ref": payload.ref}' } }] },
          { when: 'payload.kind = "issue"', steps: [{ key: 'on_issue', type: 'transform', config: { expression: '"issue"' } }] },
        ],
        default: [
          {
            key: 'paid',
            type: 'wait_for_delivery',
            config: { trigger: 'orders', match: 'payload.order_id = "o-1"', timeout: '1h', on_timeout: 'continue' },
          },
        ],
      },
    },
    {
      key: 'each_line',
      type: 'for_each',
      config: {
        items: 'payload.lines',
        concurrency: 2,
        steps: [{ key: 'line', type: 'transform', config: { expression: 'item.qty > 0 ? {"index": index, "qty": item.qty} : $error("no quantity")' } }],
      },
    },
    { key: 'cool_off', type: 'delay', config: { duration: '"1h"' } },
  ],
  on_failure_params: [{ key: 'alert', type: 'transform', config: { expression: '{"failed": failure.step}' } }],
});

const runOf = async (id: string) => (await f.api.get(`${API}/workflow_runs/${id}`)).body.data.attributes;
async function runUntil(payload: unknown, status: string): Promise<string> {
  const d = await deliver(f, `/api/v1/webhooks/${tokens.hook}`, JSON.stringify(payload));
  assert.equal(d.status, 202, d.text);
  const id: string = d.body.workflow_run_id;
  const deadline = Date.now() + 20_000;
  for (;;) {
    const a = await runOf(id);
    if (a.status === status) return id;
    assert.ok(Date.now() < deadline && !['succeeded', 'failed', 'cancelled'].includes(a.status), `run ${id} is ${a.status}, not ${status}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function go(page: Page, hash: string): Promise<void> {
  await page.evaluate(`location.hash = ${JSON.stringify(hash)}`);
}

describe('control flow in the console', { skip: BROWSER_SKIP }, () => {
  it('draws the branches, the loop and the waits of a saved workflow', async () => {
    const page = await consoleAs(f.t, f.tenant);
    await go(page, `#/workflows/${workflow.id}`);
    await page.getByRole('heading', { level: 1, name: 'Router' }).waitFor();
    const list = page.getByRole('list', { name: /^Flow of version 1, in order$/ });
    await list.waitFor();
    const items = (await list.getByRole('listitem').allInnerTexts()).map((t) => t.trim());
    assert.deepEqual(items, [
      'Trigger hook: webhook',
      'Trigger orders: webhook',
      'Step 1: route, switch — branches: 2 cases and a default; the first true case runs',
      'case 1: when payload.kind = "push"',
      'on_push, transform (nested)',
      'case 2: when payload.kind = "issue"',
      'on_issue, transform (nested)',
      'default',
      'paid, wait for delivery (nested) — waits for a delivery on orders where payload.order_id = "o-1", at most 1h; then goes on on timeout',
      'Step 2: each_line, for each — loop: its steps run for each item of payload.lines, 2 at once',
      'for each item',
      'line, transform (nested)',
      'Step 3: cool_off, delay — waits "1h"',
    ]);
    // The picture says the same: the branch labels, the loop, the waits' dashed boxes.
    const svg = page.getByRole('img', { name: /Flow of version 1/ });
    const text = await svg.locator('text').allTextContents();
    for (const label of [
      'case 1: when payload.kind = "push"',
      'case 2: when payload.kind = "issue"',
      'default',
      'for each item',
      'paid',
      '3. cool_off',
      'delay: waits "1h"',
    ])
      assert.ok(text.includes(label), `the drawing shows ${label}: ${JSON.stringify(text)}`);
    assert.equal(await svg.locator('g.wf-wait').count(), 2, 'the two waits are drawn as waits');
    assert.equal(await svg.locator('g.wf-step.nested').count(), 4, 'four nested steps, drawn indented');
    // The keyboard selects a nested step and shows its config.
    await list.getByRole('button', { name: 'paid, wait for delivery (nested)' }).focus();
    await page.getByRole('heading', { name: 'Step paid (wait for delivery)' }).waitFor();
    await assertAccessible(page, 'the flow of a workflow with a switch, a for_each and waits');
  });

  it('shows a waiting run’s branch, items and wait, lists it under waiting, and cancels it', async () => {
    const id = await runUntil({ kind: 'push', ref: 'main', lines: [{ qty: 1 }, { qty: 2 }, { qty: 3 }] }, 'waiting');
    const resumeAt: string = (await runOf(id)).resume_at;
    assert.ok(resumeAt, 'a waiting run has resume_at');

    const page = await consoleAs(f.t, f.tenant);
    // The runs list filters waiting runs.
    await go(page, '#/runs');
    await page.getByRole('heading', { level: 1, name: 'Runs' }).waitFor();
    await page.getByLabel('Status').selectOption('waiting');
    await page.waitForFunction("location.hash.includes('status=waiting')");
    await page.getByRole('link', { name: `Run ${id}`, exact: true }).click();

    const status = page.getByTestId('run-status');
    await status.getByText('waiting').waitFor();
    const notice = page.getByTestId('run-waiting');
    await notice.filter({ hasText: 'waits "1h"' }).waitFor();
    // As docs/console.md shows it, the time in the reader's locale.
    const docs = fs.readFileSync(path.join(ROOT, 'docs', 'console.md'), 'utf8');
    const shown = /### A waiting run[\s\S]*?```text\n(.+)\n```/.exec(docs)![1]!;
    const [before, after] = shown.split('12/2/26, 10:15:00 AM') as [string, string];
    const text = await notice.innerText();
    assert.ok(text.startsWith(before) && text.endsWith(after), `${text} is shown as docs/console.md has it: ${shown}`);
    assert.equal(await notice.locator('time').getAttribute('datetime'), resumeAt);
    assert.equal(await page.getByTestId('run-resume-at').locator('time').getAttribute('datetime'), resumeAt);
    // The switch's branch and its step; the loop's items and each item's step.
    const steps = page.getByTestId('run-steps');
    const route = steps.getByRole('listitem').filter({ has: page.getByRole('heading', { name: '1. route' }) });
    // The case's expression comes from the version's steps, read after the run.
    await route.getByTestId('step-branch').getByText('case 1: when payload.kind = "push"', { exact: true }).waitFor();
    assert.equal(await route.getByTestId('step-branch').innerText(), 'Branch: case 1: when payload.kind = "push"');
    const branch = route.getByRole('list', { name: "Steps of route's branch" });
    await branch.getByRole('heading', { name: 'on_push' }).waitFor();
    await branch.getByText('Output').click();
    assert.deepEqual(JSON.parse(await branch.getByLabel('Output of on_push').innerText()), { ref: 'main' });
    const loop = steps.getByRole('listitem').filter({ has: page.getByRole('heading', { name: '2. each_line' }) });
    assert.equal(await loop.getByTestId('step-items').innerText(), 'Items: 3: 3 succeeded, 0 stopped, 0 failed, 0 not run.');
    const itemList = loop.getByRole('list', { name: 'Items of each_line' });
    assert.deepEqual(await itemList.getByRole('heading', { level: 4, name: /^each_line item / }).allInnerTexts(), [
      'each_line item 0',
      'each_line item 1',
      'each_line item 2',
    ]);
    const item2 = itemList.getByRole('list', { name: 'Steps of each_line item 2' });
    await item2.getByText('Output').click();
    assert.deepEqual(JSON.parse(await item2.getByLabel('Output of line').innerText()), { index: 2, qty: 3 });
    const wait = steps.getByRole('listitem').filter({ has: page.getByRole('heading', { name: '3. cool_off' }) });
    assert.match(await wait.getByTestId('step-waits').innerText(), /^Waiting: waits "1h"; resumes at .+ at the latest\.$/);
    await assertAccessible(page, 'a waiting run with nested records');

    // Cancel: a confirmation first; keeping the run changes nothing.
    await page.getByRole('button', { name: 'Cancel run…' }).click();
    const dialog = page.getByRole('dialog', { name: /^Cancel run / });
    await dialog.waitFor();
    assert.match(await dialog.innerText(), /never runs or resumes again, and a delivery it waits for starts a run of its own/);
    await assertAccessible(page, 'the cancel confirmation');
    await dialog.getByRole('button', { name: 'Keep the run' }).click();
    await dialog.waitFor({ state: 'hidden' });
    assert.equal((await runOf(id)).status, 'waiting');
    await page.getByRole('button', { name: 'Cancel run…' }).click();
    await dialog.getByRole('button', { name: 'Cancel run', exact: true }).click();
    await status.getByText('cancelled').waitFor();
    await dialog.waitFor({ state: 'hidden' });
    assert.equal(await page.getByRole('button', { name: 'Cancel run…' }).count(), 0, 'a cancelled run offers no cancel');
    assert.equal(await page.getByTestId('run-waiting').count(), 0);
    const skipped = steps.getByRole('listitem').filter({ has: page.getByRole('heading', { name: '3. cool_off' }) });
    await skipped.getByText('Skipped: run cancelled').waitFor();
    const stored = await runOf(id);
    assert.equal(stored.status, 'cancelled');
    assert.equal(stored.outcome, 'cancelled');
    await assertAccessible(page, 'a cancelled run');

    // The list filters cancelled runs too.
    await go(page, '#/runs');
    await page.getByLabel('Status').selectOption('cancelled');
    await page.getByRole('link', { name: `Run ${id}`, exact: true }).waitFor();
  });

  it('shows a failed item of a for_each and the on_failure steps apart, marked', async () => {
    const id = await runUntil({ kind: 'issue', lines: [{ qty: 1 }, { qty: 0 }] }, 'failed');
    const page = await consoleAs(f.t, f.tenant);
    await go(page, `#/runs/${id}`);
    await page.getByTestId('run-status').getByText('failed').waitFor();
    const steps = page.getByTestId('run-steps');
    const route = steps.getByRole('listitem').filter({ has: page.getByRole('heading', { name: '1. route' }) });
    // The case's expression comes from the version's steps, read after the run.
    await route.getByTestId('step-branch').getByText('case 2: when payload.kind = "issue"', { exact: true }).waitFor();
    const loop = steps.getByRole('listitem').filter({ has: page.getByRole('heading', { name: '2. each_line' }) });
    assert.match(await loop.getByTestId('step-items').innerText(), /^Items: 2: 1 succeeded, 0 stopped, 1 failed, 0 not run/);
    const failedItem = loop.getByRole('listitem').filter({ has: page.getByRole('heading', { name: 'each_line item 1' }) });
    await failedItem.getByText('no quantity').first().waitFor();
    // The on_failure steps: after the run's own, under their own heading, each marked.
    const onFailure = page.getByRole('list', { name: 'On failure' });
    const alert = onFailure.getByRole('listitem').filter({ has: page.getByRole('heading', { name: /\. alert$/ }) });
    await alert.getByText('on failure', { exact: true }).waitFor();
    await alert.getByText('succeeded', { exact: true }).waitFor();
    assert.deepEqual(JSON.parse(await alert.getByLabel('Output of alert').innerText()), { failed: 'line' });
    assert.equal(await steps.getByRole('heading', { name: /\. alert$/ }).count(), 0, 'not among the run’s own steps');
    await assertAccessible(page, 'a failed run with on_failure records');
  });
});
