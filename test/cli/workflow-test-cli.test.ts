/**
 * `tributary workflow test`: a sample payload through POST /api/json/v1/workflows/{id}/test_run,
 * printed one block per step. Needs the test_run endpoint (built on its own branch).
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, it } from 'node:test';
import { runCli } from '../helpers/cli.ts';
import { jsonApi, seedTenant, startApp, tokenFor } from '../helpers/app.ts';
import { API, createModel } from '../webhooks/helpers.ts';
import { renderTestRun } from '../../src/cli/workflow-commands.ts';

const t = await startApp();
after(() => t.close());
const tenant = await seedTenant(t.deps);
const api = jsonApi(t, await tokenFor(t, tenant));
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tributary-wftest-'));
after(() => fs.rmSync(dir, { recursive: true, force: true }));
const SECRET = 'tok_shop_0123456789abcdef';

const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: '1', TRIBUTARY_CLIENT_ID: tenant.clientId, TRIBUTARY_CLIENT_SECRET: tenant.clientSecret };
const cli = (args: string[]) => runCli(['--url', t.url, ...args], env);
const write = (name: string, text: string) => {
  const file = path.join(dir, name);
  fs.writeFileSync(file, text);
  return file;
};

await createModel({ t, tenant, api, bearer: '' }, 'orders', [
  { name: 'order_id', type: 'string' },
  { name: 'amount', type: 'float' },
]);
const connector = await api.post(`${API}/external_connectors`, {
  data: {
    type: 'external_connector',
    attributes: {
      name: 'Shop',
      auth_type: 'bearer_token',
      type: 'http',
      direction: 'outbound',
      config: { base_url: 'https://shop.example.com' },
      secret: SECRET,
    },
  },
});
assert.equal(connector.status, 201, connector.text);

const applied = await cli([
  'workflow',
  'apply',
  '-f',
  write(
    'orders.yaml',
    `name: orders
triggers:
  shop: { type: webhook }
steps:
  shape: { type: transform, expression: "{ 'id': payload.data.id, 'amount': payload.data.amount }" }
  big: { type: condition, expression: '$exists(steps.shape.amount)' }
  store: { type: write_fact, data_model_slug: orders, mapping: { order_id: steps.shape.id, amount: steps.shape.amount } }
  notify: { type: http_request, connector_id: ${connector.body.data.id}, method: POST, path: /notify, body: steps.shape }
`,
  ),
]);
assert.equal(applied.code, 0, applied.stderr);

it('prints each step: status, output, the fact it would write, the request it would send (credentials redacted)', async () => {
  const payload = write('order.json', JSON.stringify({ data: { id: 'o-1', amount: 12.5 } }));
  const r = await cli(['workflow', 'test', 'orders', '--payload', payload]);
  assert.equal(r.code, 0, r.stdout + r.stderr);
  assert.match(r.stdout, /^test run of workflow \S+ version 1: /);
  assert.match(r.stdout, /facts it would write: 1/);
  assert.match(r.stdout, /1\. shape \(transform\): succeeded\n {3}output: \{"id":"o-1","amount":12\.5\}/);
  assert.match(r.stdout, /2\. big \(condition\): succeeded/);
  assert.match(r.stdout, /3\. store \(write_fact\): succeeded[^]*would write:\n {5}.*"order_id":"o-1"/);
  assert.match(r.stdout, /4\. notify \(http_request\): \w+/);
  assert.match(r.stdout, /request: POST https:\/\/shop\.example\.com\/notify/);
  assert.match(r.stdout, /authorization: .*\[redacted\]/i);
  assert.ok(!r.stdout.includes(SECRET), 'the connector secret is never shown');

  const json = await cli(['--json', 'workflow', 'test', 'orders', '--payload', payload]);
  assert.equal(json.code, 0, json.stderr);
  const data = JSON.parse(json.stdout);
  assert.equal(data.type, 'workflow_test_run');
  assert.equal(data.attributes.workflow_version, 1);
  assert.deepEqual(
    data.attributes.steps.map((s: any) => s.key),
    ['shape', 'big', 'store', 'notify'],
  );
  // Nothing was stored: no run, no fact.
  const runs = await api.get(`${API}/workflow_runs`);
  assert.deepEqual(runs.body.data, []);
  const facts = await t.deps.db.selectFrom('facts').select('id').where('workspace_id', '=', tenant.workspaceId).execute();
  assert.deepEqual(facts, []);
});

it('shows the problems of a payload the model refuses, and a failed test run exits 1', async () => {
  const payload = write('bad-order.json', JSON.stringify({ data: { id: 'o-2', amount: 'twelve' } }));
  const r = await cli(['workflow', 'test', 'orders', '--payload', payload]);
  assert.match(r.stdout, /3\. store \(write_fact\): failed/);
  assert.match(r.stdout, /problems:\n {5}.*\/amount: /);
  assert.equal(r.code, 1, r.stdout + r.stderr);
});

it('--header gives the sample delivery its headers (repeatable), --delivery-id its id; a bad --header is a usage error', async () => {
  const payload = write('hdr.json', JSON.stringify({ data: { id: 'o-3', amount: 1 } }));
  const r = await cli([
    '--json',
    'workflow',
    'test',
    'orders',
    '--payload',
    payload,
    '--header',
    'X-GitHub-Event: push',
    '--header',
    'Authorization: Bearer abc',
    '--header',
    'X-Note:  a: b ',
    '--delivery-id',
    'd-9',
  ]);
  assert.equal(r.code, 0, r.stderr);
  const input = JSON.parse(r.stdout).attributes.steps[0].input;
  assert.deepEqual(input.delivery, { id: 'd-9', headers: { 'x-github-event': 'push', 'x-note': 'a: b' } });
  const noId = await cli(['--json', 'workflow', 'test', 'orders', '--payload', payload, '--header', 'Idempotency-Key: evt-1']);
  assert.equal(noId.code, 0, noId.stderr);
  assert.deepEqual(JSON.parse(noId.stdout).attributes.steps[0].input.delivery, { id: 'evt-1', headers: { 'idempotency-key': 'evt-1' } });
  const none = await cli(['--json', 'workflow', 'test', 'orders', '--payload', payload]);
  assert.equal(JSON.parse(none.stdout).attributes.steps[0].input.delivery, null);
  for (const bad of ['no colon', ': v', 'bad name: v']) {
    const b = await cli(['workflow', 'test', 'orders', '--payload', payload, '--header', bad]);
    assert.equal(b.code, 2, b.stderr);
    assert.match(b.stderr, /expected 'Name: value'/);
  }
  const twice = await cli(['workflow', 'test', 'orders', '--payload', payload, '--header', 'X-A: 1', '--header', 'x-a: 2']);
  assert.equal(twice.code, 2);
  assert.match(twice.stderr, /the header x-a is given twice/);
});

it('a payload file that is not JSON, an unknown workflow and a bad --version are clear errors', async () => {
  const bad = await cli(['workflow', 'test', 'orders', '--payload', write('bad.json', '{"data": ')]);
  assert.equal(bad.code, 1);
  assert.match(bad.stderr, /^error: .*bad\.json: not valid JSON/);
  const unknown = await cli(['workflow', 'test', 'nope', '--payload', write('ok.json', '{}')]);
  assert.equal(unknown.code, 1);
  assert.match(unknown.stderr, /no workflow named "nope"/);
  const version = await cli(['workflow', 'test', 'orders', '--payload', write('ok2.json', '{}'), '--version', 'zero']);
  assert.equal(version.code, 2);
  assert.match(version.stderr, /expected a version number/);
  const noSuchVersion = await cli(['workflow', 'test', 'orders', '--payload', write('ok3.json', '{}'), '--version', '9']);
  assert.equal(noSuchVersion.code, 1);
  assert.match(noSuchVersion.stderr, /^error: .*\(HTTP 4\d\d \w+\)\n$/);
});

it('renders an answer of the documented shape: every step block, facts, problems, the request as the server redacted it', () => {
  const text = renderTestRun({
    workflow_id: 'wf-1',
    workflow_version: 3,
    status: 'failed',
    outcome: 'failed',
    facts_would_write: 1,
    error: 'step store failed',
    steps: [
      { key: 'shape', type: 'transform', status: 'succeeded', input: {}, output: { id: 'o-1' }, error: null },
      { key: 'big', type: 'condition', status: 'succeeded', input: {}, output: true, error: null, value: true },
      {
        key: 'store',
        type: 'write_fact',
        status: 'failed',
        input: {},
        output: null,
        error: 'a fact does not fit the data model',
        facts: [{ data: { order_id: 'o-1' } }],
        problems: [{ item: 0, pointer: '/amount', detail: 'must be a float' }],
      },
      {
        key: 'notify',
        type: 'http_request',
        status: 'skipped',
        reason: 'not called: POST is not a safe method',
        input: {},
        output: null,
        error: null,
        request: { method: 'POST', url: 'https://shop.example.com/notify', headers: { authorization: '[redacted]' }, body: { id: 'o-1' } },
      },
    ],
  });
  assert.match(
    text,
    /^test run of workflow wf-1 version 3: failed \(outcome failed\); nothing was stored\nerror: step store failed\nfacts it would write: 1\n/,
  );
  assert.match(text, /\n1\. shape \(transform\): succeeded\n {3}output: \{"id":"o-1"\}\n/);
  assert.match(text, /\n2\. big \(condition\): succeeded\n {3}value: true\n/);
  assert.match(
    text,
    /\n3\. store \(write_fact\): failed\n {3}error: a fact does not fit the data model\n {3}would write:\n {5}\{"data":\{"order_id":"o-1"\}\}\n {3}problems:\n {5}item 0 \/amount: must be a float\n/,
  );
  assert.match(
    text,
    /\n4\. notify \(http_request\): skipped: not called: POST is not a safe method\n {3}request: POST https:\/\/shop\.example\.com\/notify\n {5}authorization: \[redacted\]\n {5}body: \{"id":"o-1"\}\n$/,
  );
});

it('-f tests a file without saving it: in the place of the workflow it names, or as a new one; its problems at their line', async () => {
  const payload = write('file-order.json', JSON.stringify({ data: { id: 'o-9', amount: 3 } }));
  const edited = write(
    'orders-edited.yaml',
    `name: orders
triggers:
  shop: { type: webhook }
steps:
  shape: { type: transform, expression: "{ 'id': payload.data.id, 'amount': payload.data.amount * 2 }" }
  store: { type: write_fact, data_model_slug: orders, mapping: { order_id: steps.shape.id, amount: steps.shape.amount } }
`,
  );
  const before = (await api.get(`${API}/workflows`)).body.data;
  const r = await cli(['--json', 'workflow', 'test', '-f', edited, '--payload', payload]);
  assert.equal(r.code, 0, r.stdout + r.stderr);
  const a = JSON.parse(r.stdout).attributes;
  assert.equal(a.workflow_id, before[0].id);
  assert.equal(a.workflow_version, null);
  assert.deepEqual(
    a.steps.map((s: any) => s.key),
    ['shape', 'store'],
  );
  assert.equal(a.steps[1].facts[0].data.amount, 6);
  const text = await cli(['workflow', 'test', '-f', edited, '--payload', payload]);
  assert.equal(text.code, 0, text.stderr);
  assert.match(text.stdout, /^test run of \S+orders-edited\.yaml \(unsaved, in the place of workflow \S+\): succeeded/);
  // Nothing saved: the workflow keeps its four steps.
  const after = (await api.get(`${API}/workflows/${before[0].id}`)).body.data.attributes;
  assert.equal(after.steps.length, 4);
  assert.equal(after.version, 1);

  const fresh = await cli([
    '--json',
    'workflow',
    'test',
    '-f',
    write('new.yaml', (fs.readFileSync(edited, 'utf8') as string).replace('name: orders', 'name: not saved')),
    '--payload',
    payload,
  ]);
  assert.equal(fresh.code, 0, fresh.stderr);
  assert.equal(JSON.parse(fresh.stdout).attributes.workflow_id, null);
  assert.equal((await api.get(`${API}/workflows`)).body.data.length, before.length);

  const bad = await cli([
    'workflow',
    'test',
    '-f',
    write('bad-model.yaml', fs.readFileSync(edited, 'utf8').replace('data_model_slug: orders', 'data_model_slug: nothing')),
    '--payload',
    payload,
  ]);
  assert.equal(bad.code, 1);
  assert.match(bad.stderr, /bad-model\.yaml at steps\.store\.data_model_slug \(line 6, column \d+\): data_model_slug "nothing" is not a data model/);
  const broken = await cli(['workflow', 'test', '-f', write('broken.yaml', 'name: x\nsteps: [\n'), '--payload', payload]);
  assert.equal(broken.code, 1);
  assert.match(broken.stderr, /broken\.yaml: not valid YAML: .*\(line \d+, column \d+\)/);
});
