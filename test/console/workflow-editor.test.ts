/**
 * Editing a workflow's file in the console (CodeMirror, its own chunk): a bad step is marked at
 * its line, a test run runs the unsaved text, a save makes a new version, and a save over a
 * change made through the API since the page was opened is refused and shows that change.
 * New workflows start from the templates docs/console.md shows.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { describe, it } from 'node:test';
import type { Page } from 'playwright-core';
import { BROWSER_SKIP, assertAccessible, consoleAs } from '../helpers/browser.ts';
import { createModel, saveOk, startFlow } from '../webhooks/helpers.ts';
import { CONSOLE_DIST } from '../../src/console/surface.ts';
import { WORKFLOW_TEMPLATES } from '../../console/src/pages/workflow-templates.ts';

const f = await startFlow({}, {});
await createModel(f, 'orders', [
  { name: 'order_id', type: 'string' },
  { name: 'amount', type: 'float' },
]);
const saved = await saveOk(f, {
  wf_params: { name: 'Orders', description: null, is_active: true },
  step_params: [
    { key: 'shape', type: 'transform', config: { expression: "{ 'order_id': payload.data.id, 'amount': payload.data.amount }" } },
    { key: 'store', type: 'write_fact', config: { data_model_slug: 'orders', data: 'steps.shape' } },
  ],
  trigger_params: [{ key: 'hook', type: 'webhook', service_account_id: f.tenant.credentialId }],
});
const id: string = saved.workflow.id;

async function go(page: Page, hash: string): Promise<void> {
  await page.evaluate(`location.hash = ${JSON.stringify(hash)}`);
}

/** The editor's text, and typing into it as a person does (select all, then type). */
const editorText = (page: Page) =>
  // The document itself (CodeMirror keeps its view on the content element), not the rendering of it.
  page.locator('.cm-content').evaluate((el) => {
    type Holder = { view: { state: { doc: unknown } } };
    const c = el as unknown as { cmView?: Holder; cmTile?: Holder };
    return String((c.cmView ?? c.cmTile)!.view.state.doc);
  });
async function replaceText(page: Page, text: string): Promise<void> {
  const content = page.getByRole('textbox', { name: 'Workflow file (YAML)' });
  await content.click();
  await page.keyboard.press('Control+A');
  // Pasted, as a person replaces a file's text: typed, CodeMirror's auto-indent would reshape the lines.
  await page.evaluate(
    `(() => { const data = new DataTransfer(); data.setData('text/plain', ${JSON.stringify(text)});` +
      `document.querySelector('.wf-editor-host').shadowRoot.querySelector('.cm-content').dispatchEvent(new ClipboardEvent('paste', { clipboardData: data, bubbles: true, cancelable: true })); })()`,
  );
  assert.equal(await editorText(page), text, 'the editor holds the pasted text');
}

/** The 1-based line of the editor that carries a lint marker's error underline. */
async function markedLines(page: Page): Promise<number[]> {
  await page.locator('.cm-lintRange-error').first().waitFor();
  return page.locator('.cm-line').evaluateAll((lines) => lines.flatMap((l, i) => (l.querySelector('.cm-lintRange-error') ? [i + 1] : [])));
}

describe('the workflow editor', { skip: BROWSER_SKIP }, () => {
  it('marks a bad step at its line, tests the unsaved text, saves a new version; a stale save is refused and shows the other change', async () => {
    const page = await consoleAs(f.t, f.tenant);
    await go(page, `#/workflows/${id}`);
    await page.getByRole('heading', { level: 1, name: 'Orders' }).waitFor();
    const content = page.getByRole('textbox', { name: 'Workflow file (YAML)' });
    await content.waitFor();
    const text = await editorText(page);
    assert.match(text, /^name: Orders$/m);
    assert.match(text, /^lock_version: /m);
    await assertAccessible(page, 'the workflow page with its editor');

    // A step of an unknown type: marked at its line as soon as the text reads (the file's own check)...
    const lines = text.split('\n');
    const storeLine = lines.findIndex((l) => /^ {2}store:$/.test(l));
    assert.ok(storeLine > 0, text);
    const bad = [...lines.slice(0, storeLine + 1), '    type: write_fact', '    data_model_slug: nope', '    data: steps.shape', ''].join('\n');
    await replaceText(page, bad);
    // ...and the save's own check (no such data model) at the data_model_slug line.
    await page.getByRole('button', { name: 'Save', exact: true }).click();
    await page.getByText(/Line \d+: data_model_slug "nope" is not a data model/).waitFor();
    assert.deepEqual(await markedLines(page), [storeLine + 3]);
    assert.equal((await f.api.get(`/api/json/v1/workflows/${id}`)).body.data.attributes.version, 1);

    // A good edit, tested unsaved: the test run shows the new expression's output.
    const good = text.replace('payload.data.amount }', 'payload.data.amount * 2 }');
    await replaceText(page, good);
    const form = page.getByRole('form', { name: 'Test run' });
    await form.getByLabel('Sample payload (JSON)').fill('{"data": {"id": "o-7", "amount": 4}}');
    await form.getByRole('checkbox', { name: /Test the editor's text/ }).check();
    await form.getByRole('button', { name: 'Run test' }).click();
    await page.getByRole('heading', { name: /Result of the unsaved text/ }).waitFor();
    assert.match(await page.locator('.wf-test-result').innerText(), /"amount": 8/);

    // The difference against the saved version.
    await page.getByRole('button', { name: 'Show the difference' }).click();
    const diff = page.getByLabel("Your change: from the saved version to the editor's text");
    assert.match(await diff.innerText(), /\+ .*amount \* 2/);
    assert.match(await diff.innerText(), /− .*payload\.data\.amount \}/);

    await page.getByRole('button', { name: 'Save', exact: true }).click();
    await page.getByText('Saved: version 2.').waitFor();
    await page.getByText('Current version').waitFor();
    const after = (await f.api.get(`/api/json/v1/workflows/${id}`)).body.data.attributes;
    assert.equal(after.version, 2);
    assert.match(after.steps[0].config.expression, /amount \* 2/);
    assert.equal(after.triggers[0].id, saved.workflow.attributes.triggers[0].id, 'the trigger is kept, with its token');

    // Someone else saves through the API; this page still holds the version it started from.
    await page.getByRole('textbox', { name: 'Workflow file (YAML)' }).waitFor();
    // The page renders the saved version anew: the editor's host is briefly absent, so every step may be null.
    await page.waitForFunction(`/amount \\* 2/.test(document.querySelector('.wf-editor-host')?.shadowRoot?.querySelector('.cm-content')?.textContent ?? '')`);
    const other = await f.api.post('/api/json/v1/workflows/save_builder_state', {
      data: {
        type: 'workflow_builder_state',
        attributes: {
          is_new_version: true,
          organization_id: f.tenant.organizationId,
          workflow_id: id,
          lock_version: after.lock_version,
          wf_params: { name: 'Orders', description: null, is_active: true },
          step_params: [
            { key: 'shape', type: 'transform', config: { expression: "{ 'order_id': payload.data.id, 'amount': payload.data.amount * 3 }" } },
            { key: 'store', type: 'write_fact', config: { data_model_slug: 'orders', data: 'steps.shape' } },
          ],
          trigger_params: after.triggers.map((t: any) => ({ id: t.id, key: t.key, type: t.type, service_account_id: t.service_account_id })),
        },
      },
    });
    assert.equal(other.status, 201, other.text);
    const mine = (await editorText(page)).replace('amount * 2 }', 'amount * 5 }');
    await replaceText(page, mine);
    await page.getByRole('button', { name: 'Save', exact: true }).click();
    await page.getByText(/someone else saved this workflow since you started editing/).waitFor();
    const theirs = page.getByLabel('The other change: from the version you started from to the current one');
    assert.match(await theirs.innerText(), /\+ .*amount \* 3/);
    const now = (await f.api.get(`/api/json/v1/workflows/${id}`)).body.data.attributes;
    assert.equal(now.version, 3);
    assert.match(now.steps[0].config.expression, /amount \* 3/, 'the stale save changed nothing');
    await assertAccessible(page, 'the editor after a refused save');
  });

  it('starts a new workflow from a template, keyboard only to the editor', async () => {
    const page = await consoleAs(f.t, f.tenant);
    await go(page, '#/workflows');
    await page.getByRole('link', { name: 'New workflow' }).click();
    await page.getByRole('heading', { level: 1, name: 'New workflow' }).waitFor();
    const link = page.getByRole('link', { name: 'Stripe payment to facts' });
    await link.focus();
    await page.keyboard.press('Enter');
    const content = page.getByRole('textbox', { name: 'Workflow file (YAML)' });
    await content.waitFor();
    assert.match(await editorText(page), /^name: Stripe payments$/m);
    // Tab reaches the editor and leaves it again: the keyboard is never trapped.
    const inEditor = () =>
      page.evaluate<boolean>(
        `(() => { const r = document.querySelector('.wf-editor-host').shadowRoot; return r.activeElement === r.querySelector('.cm-content'); })()`,
      );
    await content.focus();
    assert.equal(await inEditor(), true);
    await page.keyboard.press('Tab');
    assert.equal(await inEditor(), false);
    await assertAccessible(page, 'a new workflow from a template');
    // The template names the data model payments, which this workspace lacks: said at its line.
    await page.getByRole('button', { name: 'Create the workflow' }).click();
    await page.getByText(/Line \d+: data_model_slug "payments" is not a data model/).waitFor();
  });
});

describe('templates and budget', () => {
  it('docs/console.md shows every template as the console has it', () => {
    const doc = fs.readFileSync(path.resolve(import.meta.dirname, '..', '..', 'docs', 'console.md'), 'utf8');
    for (const t of WORKFLOW_TEMPLATES) assert.ok(doc.includes(`\`\`\`yaml\n${t.yaml}\`\`\``), `docs/console.md shows the template ${t.id}`);
  });

  it('keeps the editor out of the initial JavaScript, in a chunk of at most 160 KB gzipped', () => {
    const html = fs.readFileSync(path.join(CONSOLE_DIST, 'index.html'), 'utf8');
    const entry = /src="\/console\/assets\/([^"]+\.js)"/.exec(html)![1]!;
    const entryText = fs.readFileSync(path.join(CONSOLE_DIST, 'assets', entry), 'utf8');
    assert.doesNotMatch(entryText, /cm-lintRange/, 'CodeMirror is not in the initial JavaScript');
    const chunks = fs.readdirSync(path.join(CONSOLE_DIST, 'assets')).filter((n) => n.startsWith('chunk-') && n.endsWith('.js'));
    assert.ok(chunks.length >= 1);
    for (const c of chunks) {
      const gz = gzipSync(fs.readFileSync(path.join(CONSOLE_DIST, 'assets', c))).length;
      assert.ok(gz <= 160 * 1024, `${c} is ${gz} bytes gzipped`);
    }
  });
});
