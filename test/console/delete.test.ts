/**
 * The console's Delete buttons: a modal confirmation (axe-clean), Cancel deletes nothing,
 * a refusal (409) is shown in the dialog, a data model's asks for its slug typed out; after
 * a delete the page is the list, without the deleted one.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Page } from 'playwright-core';
import { BROWSER_SKIP, assertAccessible, consoleAs } from '../helpers/browser.ts';
import { API, createModel, saveOk, startFlow } from '../webhooks/helpers.ts';

const f = await startFlow({}, {});

async function go(page: Page, hash: string): Promise<void> {
  await page.evaluate(`location.hash = ${JSON.stringify(hash)}`);
}

describe('delete in the console', { skip: BROWSER_SKIP }, () => {
  it('a workflow: Cancel keeps it; Delete removes it and shows the list', async () => {
    const { workflow } = await saveOk(f, {
      wf_params: { name: 'Throwaway', is_active: true },
      step_params: [{ key: 'a', type: 'transform', config: { expression: 'payload' } }],
    });
    const page = await consoleAs(f.t, f.tenant);
    await go(page, `#/workflows/${workflow.id}`);
    await page.getByRole('heading', { level: 1, name: 'Throwaway' }).waitFor();
    await page.getByRole('button', { name: 'Delete workflow' }).click();
    const dialog = page.getByRole('dialog', { name: 'Delete the workflow Throwaway?' });
    await dialog.waitFor();
    await assertAccessible(page, 'the delete confirmation');
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await dialog.waitFor({ state: 'hidden' });
    assert.equal((await f.api.get(`${API}/workflows/${workflow.id}`)).status, 200, 'Cancel deletes nothing');
    await page.getByRole('button', { name: 'Delete workflow' }).click();
    await dialog.getByRole('button', { name: 'Delete workflow' }).click();
    await page.getByRole('heading', { level: 1, name: 'Workflows' }).waitFor();
    assert.equal(await page.getByRole('link', { name: 'Throwaway', exact: true }).count(), 0);
    assert.equal((await f.api.get(`${API}/workflows/${workflow.id}`)).status, 404);
  });

  it('a data model: Delete waits for the slug; a model a workflow writes to is refused in the dialog, naming it', async () => {
    const modelId = await createModel(f, 'orders', [{ name: 'order_id', type: 'string' }]);
    const { workflow } = await saveOk(f, {
      wf_params: { name: 'Orders in', is_active: true },
      step_params: [{ key: 's', type: 'write_fact', config: { data_model_slug: 'orders', mapping: { order_id: 'payload.id' } } }],
    });
    const page = await consoleAs(f.t, f.tenant);
    await go(page, '#/facts/orders');
    await page.getByRole('heading', { level: 1, name: 'Facts of orders' }).waitFor();
    await page.getByRole('button', { name: 'Delete data model' }).click();
    const dialog = page.getByRole('dialog', { name: 'Delete the data model orders?' });
    await dialog.waitFor();
    const confirm = dialog.getByRole('button', { name: 'Delete data model' });
    assert.ok(await confirm.isDisabled(), 'disabled until the slug is typed');
    const input = dialog.getByRole('textbox', { name: 'Type orders to confirm' });
    await input.fill('order');
    assert.ok(await confirm.isDisabled());
    await input.fill('orders');
    assert.ok(!(await confirm.isDisabled()));
    await assertAccessible(page, 'the data model delete confirmation');
    await confirm.click();
    const refusal = dialog.getByRole('alert');
    await refusal.waitFor();
    assert.match(await refusal.innerText(), new RegExp(`"Orders in" \\(${workflow.id}\\)`));
    assert.equal((await f.api.get(`${API}/data_models/${modelId}`)).status, 200);

    assert.equal((await f.api.request('DELETE', `${API}/workflows/${workflow.id}`)).status, 204);
    await confirm.click();
    await page.getByRole('heading', { level: 1, name: 'Facts', exact: true }).waitFor();
    assert.equal((await f.api.get(`${API}/data_models/${modelId}`)).status, 404);
  });

  it('a connector and an API specification: Delete goes back to the connectors', async () => {
    const c = await f.api.post(`${API}/external_connectors`, {
      data: { type: 'external_connector', attributes: { name: 'Billing', auth_type: 'none', config: { base_url: 'https://api.billing.example' } } },
    });
    assert.equal(c.status, 201, c.text);
    const raw = JSON.stringify({ openapi: '3.1.0', info: { title: 'T', version: '1' }, paths: {} });
    const s = await f.api.post(`${API}/api_specs`, { data: { type: 'api_spec', attributes: { name: 'Notes API', format: 'json', raw_document: raw } } });
    assert.equal(s.status, 201, s.text);
    const page = await consoleAs(f.t, f.tenant);
    await go(page, `#/api-specs/${s.body.data.id}`);
    await page.getByRole('heading', { level: 1, name: 'Notes API' }).waitFor();
    await page.getByRole('button', { name: 'Delete API specification' }).click();
    await page.getByRole('dialog', { name: 'Delete the API specification Notes API?' }).getByRole('button', { name: 'Delete API specification' }).click();
    await page.getByRole('heading', { level: 1, name: /Connectors/ }).waitFor();
    assert.equal((await f.api.get(`${API}/api_specs/${s.body.data.id}`)).status, 404);

    await go(page, `#/connectors/${c.body.data.id}`);
    await page.getByRole('heading', { level: 1, name: 'Billing' }).waitFor();
    await page.getByRole('button', { name: 'Delete connector' }).click();
    await page.getByRole('dialog', { name: 'Delete the connector Billing?' }).getByRole('button', { name: 'Delete connector' }).click();
    await page.getByRole('heading', { level: 1, name: /Connectors/ }).waitFor();
    assert.equal((await f.api.get(`${API}/external_connectors/${c.body.data.id}`)).status, 404);
  });
});
