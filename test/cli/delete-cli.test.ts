/**
 * `tributary <type> delete`, run as the real command against a running server as the
 * tenant's service account (its credentials in a bootstrap.json): each type deleted, a
 * data model only with --yes (the facts go too), a refusal's 409 as the CLI prints it.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import * as admin from '../../src/admin/service.ts';
import { ROOT, runProcess, type CliRun } from '../helpers/cli.ts';
import { API, createModel, saveOk, startFlow, type Flow } from '../webhooks/helpers.ts';

const f: Flow = await startFlow({}, { worker: false });
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tributary-delete-cli-'));
after(() => fs.rmSync(dir, { recursive: true, force: true }));
fs.writeFileSync(path.join(dir, 'bootstrap.json'), JSON.stringify({ client_id: f.tenant.clientId, client_secret: f.tenant.clientSecret }), { mode: 0o600 });

/** `tributary ARGS` as the tenant's service account; with `admin`, with the admin token too (the widget commands use the admin API). */
function cli(args: string[], opts: { admin?: boolean } = {}): Promise<CliRun> {
  const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: '1', DATA_DIR: dir, TRIBUTARY_URL: f.t.url };
  for (const k of [
    'TRIBUTARY_ADMIN_TOKEN',
    'TRIBUTARY_CLIENT_ID',
    'TRIBUTARY_CLIENT_SECRET',
    'TRIBUTARY_CREDENTIALS_FILE',
    'DATABASE_URL',
    'REDIS_URL',
    'PORT',
  ])
    delete env[k];
  if (opts.admin) env.TRIBUTARY_ADMIN_TOKEN = f.t.adminToken;
  return runProcess(process.execPath, ['src/main.ts', ...args], ROOT, env, '');
}

const ok = (r: CliRun) => {
  assert.equal(r.code, 0, `exit ${r.code}\n${r.stderr}\n${r.stdout}`);
  return r;
};
const gone = async (p: string) => assert.equal((await f.api.get(`${API}/${p}`)).status, 404, p);

describe('tributary <type> delete', () => {
  it('workflow by name, connector, api-spec, field by name, widget: one line each, or one JSON document', async () => {
    const { workflow } = await saveOk(f, {
      wf_params: { name: 'Throwaway', is_active: true },
      step_params: [{ key: 'a', type: 'transform', config: { expression: 'payload' } }],
    });
    const line = ok(await cli(['workflow', 'delete', 'Throwaway']));
    assert.equal(line.stdout, `workflow "Throwaway" deleted (id ${workflow.id}); its runs stay readable\n`);
    await gone(`workflows/${workflow.id}`);
    const missing = await cli(['workflow', 'delete', 'Throwaway']);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /no workflow named "Throwaway"/);

    const c = await f.api.post(`${API}/external_connectors`, {
      data: { type: 'external_connector', attributes: { name: 'B', auth_type: 'none', config: { base_url: 'https://api.billing.example' } } },
    });
    assert.deepEqual(JSON.parse(ok(await cli(['--json', 'connector', 'delete', c.body.data.id])).stdout), {
      deleted: { type: 'external_connector', id: c.body.data.id },
    });
    await gone(`external_connectors/${c.body.data.id}`);

    const raw = JSON.stringify({ openapi: '3.1.0', info: { title: 'T', version: '1' }, paths: {} });
    const s = await f.api.post(`${API}/api_specs`, { data: { type: 'api_spec', attributes: { name: 'T', format: 'json', raw_document: raw } } });
    assert.equal(s.status, 201, s.text);
    ok(await cli(['api-spec', 'delete', s.body.data.id]));
    await gone(`api_specs/${s.body.data.id}`);

    const modelId = await createModel(f, 'notes', [
      { name: 'id', type: 'string' },
      { name: 'extra', type: 'string' },
    ]);
    const extra = (await f.api.get(`${API}/data_model_fields?filter[data_model_id]=${modelId}&filter[name]=extra`)).body.data[0].id;
    assert.match(ok(await cli(['field', 'delete', 'extra', '--model', 'notes'])).stdout, new RegExp(`field "extra" deleted \\(id ${extra}\\)`));
    await gone(`data_model_fields/${extra}`);

    const w = await admin.createWidget(f.t.deps.db, { workspace_id: f.tenant.workspaceId, data_model_id: modelId, kind: 'table' });
    assert.equal(ok(await cli(['widget', 'delete', w.id], { admin: true })).stdout, `widget ${w.id} deleted\n`);
    await gone(`dashboard_widgets/${w.id}`);
    const again = await cli(['--json', 'widget', 'delete', w.id], { admin: true });
    assert.equal(again.code, 1);
    assert.deepEqual(JSON.parse(again.stdout), { error: 'No widget with this id', status: 404, code: 'not_found' });
  });

  it('data-model delete refuses without --yes, saying the facts go too; with --yes the model is gone', async () => {
    const modelId = await createModel(f, 'events', [{ name: 'id', type: 'string' }]);
    const refused = await cli(['data-model', 'delete', 'events']);
    assert.equal(refused.code, 2);
    assert.match(refused.stderr, /deletes all its facts, its fields and its dashboard widgets too, for good: pass --yes/);
    assert.equal((await f.api.get(`${API}/data_models/${modelId}`)).status, 200, 'still there');
    const asJson = await cli(['--json', 'data-model', 'delete', 'events']);
    assert.equal(asJson.code, 2);
    assert.equal(JSON.parse(asJson.stdout).code, 'confirmation_required');
    assert.match(ok(await cli(['data-model', 'delete', 'events', '--yes'])).stdout, /data model "events" deleted .* with its facts, fields and widgets/);
    await gone(`data_models/${modelId}`);
  });

  it('a model a workflow writes to: exit 1, the 409 naming the workflow', async () => {
    await createModel(f, 'orders', [{ name: 'id', type: 'string' }]);
    const { workflow } = await saveOk(f, {
      wf_params: { name: 'Orders in', is_active: true },
      step_params: [{ key: 's', type: 'write_fact', config: { data_model_slug: 'orders', mapping: { id: 'payload.id' } } }],
    });
    const r = await cli(['data-model', 'delete', 'orders', '--yes']);
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, new RegExp(`used by the workflow "Orders in" \\(${workflow.id}\\).*\\(HTTP 409 conflict\\)`));
  });
});
