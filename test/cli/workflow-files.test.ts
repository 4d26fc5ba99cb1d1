/** `tributary workflow apply|get|list` and `data-model apply`: files through the JSON:API as a service account. */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, it } from 'node:test';
import { ROOT, runCli } from '../helpers/cli.ts';
import { jsonApi, seedAccount, startApp, seedTenant, tokenFor } from '../helpers/app.ts';
import { API } from '../webhooks/helpers.ts';

const t = await startApp();
after(() => t.close());
const tenant = await seedTenant(t.deps);
const api = jsonApi(t, await tokenFor(t, tenant));
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tributary-files-'));
after(() => fs.rmSync(dir, { recursive: true, force: true }));

/** The CLI with the account in the environment, no admin token anywhere. */
const env = (extra: Record<string, string> = {}): NodeJS.ProcessEnv => {
  const e: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: '1', TRIBUTARY_CLIENT_ID: tenant.clientId, TRIBUTARY_CLIENT_SECRET: tenant.clientSecret, ...extra };
  delete e.TRIBUTARY_ADMIN_TOKEN;
  return e;
};
const cli = (args: string[], extra?: Record<string, string>) => runCli(['--url', t.url, ...args], env(extra));
const write = (name: string, text: string) => {
  const file = path.join(dir, name);
  fs.writeFileSync(file, text);
  return file;
};

const MODEL_YAML = `# orders from the shop
slug: orders
name: Orders
fields:
  order_id: { type: string, is_primary_key: true }
  amount: { type: float, label: Amount }
`;

const WORKFLOW_YAML = `name: orders
description: Orders from the shop
is_active: true
triggers:
  shop: { type: webhook }
steps:
  shape: { type: transform, expression: "{ 'id': payload.data.id, 'amount': payload.data.amount }" }
  big: { type: condition, expression: steps.shape.amount > 0 }
  store: { type: write_fact, data_model_slug: orders, mapping: { order_id: steps.shape.id, amount: steps.shape.amount } }
`;

async function workflowNamed(name: string): Promise<any> {
  const r = await api.get(`${API}/workflows?filter[name]=${encodeURIComponent(name)}`);
  assert.equal(r.status, 200, r.text);
  assert.equal(r.body.data.length, 1, r.text);
  return r.body.data[0];
}

it('data-model apply creates the model and its fields, then changes nothing', async () => {
  const file = write('orders-model.yaml', MODEL_YAML);
  const first = await cli(['data-model', 'apply', '-f', file]);
  assert.equal(first.code, 0, first.stderr);
  assert.match(first.stdout, /data model orders created/);
  assert.match(first.stdout, /field order_id: created/);
  const model = (await api.get(`${API}/data_models?filter[slug]=orders`)).body.data[0];
  const fields = (await api.get(`${API}/data_model_fields?filter[data_model_id]=${model.id}&sort=name`)).body.data;
  assert.deepEqual(
    fields.map((f: any) => [f.attributes.name, f.attributes.type, f.attributes.is_primary_key, f.attributes.label]),
    [
      ['amount', 'float', false, 'Amount'],
      ['order_id', 'string', true, 'order_id'],
    ],
  );
  const again = await cli(['--json', 'data-model', 'apply', '-f', file]);
  assert.equal(again.code, 0, again.stderr);
  const doc = JSON.parse(again.stdout);
  assert.equal(doc.meta.action, 'unchanged');
  assert.deepEqual(doc.meta.fields, { order_id: 'unchanged', amount: 'unchanged' });
  assert.equal(doc.data.attributes.updated_at, model.attributes.updated_at);

  // JSON works the same; a new field and a changed label are applied, the rest kept.
  const json = write(
    'orders-model.json',
    JSON.stringify({
      slug: 'orders',
      name: 'Orders',
      fields: { order_id: { type: 'string', is_primary_key: true }, amount: { type: 'float', label: 'Total', is_indexed: true }, note: { type: 'string' } },
    }),
  );
  const changed = await cli(['--json', 'data-model', 'apply', '-f', json]);
  assert.equal(changed.code, 0, changed.stderr);
  assert.deepEqual(JSON.parse(changed.stdout).meta.fields, { order_id: 'unchanged', amount: 'updated (label, is_indexed)', note: 'created' });
  const amount = (await api.get(`${API}/data_model_fields?filter[data_model_id]=${model.id}&filter[name]=amount`)).body.data[0];
  assert.equal(amount.attributes.is_indexed, true, 'is_indexed reached the server');
});

it('workflow apply creates by name and prints the new token once; applying again saves nothing', async () => {
  const file = write('orders.yaml', WORKFLOW_YAML);
  const first = await cli(['workflow', 'apply', '-f', file]);
  assert.equal(first.code, 0, first.stderr);
  assert.match(first.stdout, /workflow "orders" created: id \S+, version 1/);
  const token = /\n {2}(tbwh_\S+)\n/.exec(first.stdout)?.[1];
  assert.ok(token, first.stdout);
  assert.match(first.stdout, new RegExp(`deliver to: POST ${t.url}/api/v1/webhooks/${token}`));
  const wf = await workflowNamed('orders');
  assert.deepEqual(
    wf.attributes.steps.map((s: any) => [s.key, s.type]),
    [
      ['shape', 'transform'],
      ['big', 'condition'],
      ['store', 'write_fact'],
    ],
  );
  assert.equal(wf.attributes.triggers[0].service_account_id, tenant.credentialId, 'the applying account by default');

  const again = await cli(['--json', 'workflow', 'apply', '-f', file]);
  assert.equal(again.code, 0, again.stderr);
  const doc = JSON.parse(again.stdout);
  assert.equal(doc.meta.action, 'unchanged');
  assert.deepEqual(doc.meta.trigger_tokens, {});
  const same = await workflowNamed('orders');
  assert.equal(same.attributes.lock_version, wf.attributes.lock_version);
  assert.equal(same.attributes.version, 1);
  assert.equal(same.attributes.updated_at, wf.attributes.updated_at);
  assert.ok(!again.stdout.includes('tbwh_'), 'a kept token is never shown again');
});

it('get --yaml writes the file back: applying it changes nothing, an edit saves a new version and keeps the token', async () => {
  const before = await workflowNamed('orders');
  const file = path.join(dir, 'got.yaml');
  const got = await cli(['workflow', 'get', 'orders', '--yaml', '-o', file]);
  assert.equal(got.code, 0, got.stderr);
  const text = fs.readFileSync(file, 'utf8');
  // Quoted when it reads as a number (digits and at most an e): YAML would read it back as one.
  const lockLine = (v: string) => new RegExp(`lock_version: "?${v.replace('.', '\\.')}"?\n`);
  assert.match(text, lockLine(before.attributes.lock_version));
  assert.ok(!/^\s+service_account_id:/m.test(text), 'the applying account is left out');
  // The file format's order, not the stored jsonb's (which puts shorter keys first).
  assert.deepEqual(
    text.split('\n').flatMap((l) => /^(\w+):/.exec(l)?.[1] ?? []),
    ['name', 'description', 'is_active', 'lock_version', 'triggers', 'steps'],
  );
  const store = text.slice(text.indexOf('\n  store:\n'));
  assert.deepEqual(
    store.split('\n').flatMap((l) => /^ {4}(\w+):/.exec(l)?.[1] ?? []),
    ['type', 'data_model_slug', 'mapping'],
  );
  assert.ok(text.endsWith('\n'));
  const stdout = await cli(['workflow', 'get', before.id]);
  assert.equal(stdout.stdout, text, 'by id, on stdout, the same file');

  const unchanged = await cli(['--json', 'workflow', 'apply', '-f', file]);
  assert.equal(unchanged.code, 0, unchanged.stderr);
  assert.equal(JSON.parse(unchanged.stdout).meta.action, 'unchanged');
  assert.equal((await workflowNamed('orders')).attributes.lock_version, before.attributes.lock_version);

  // An edit: a new step version; the trigger keeps its id and token; a second trigger is new.
  fs.writeFileSync(
    file,
    text.replace('steps.shape.amount > 0', 'steps.shape.amount > 10').replace('triggers:\n', 'triggers:\n  partner:\n    type: webhook\n'),
  );
  const edited = await cli(['workflow', 'apply', '-f', file]);
  assert.equal(edited.code, 0, edited.stderr);
  assert.match(edited.stdout, /workflow "orders" updated: id \S+, version 2/);
  assert.match(edited.stdout, /trigger shop: webhook, token unchanged/);
  assert.match(edited.stdout, /trigger partner: new token/);
  assert.equal((edited.stdout.match(/tbwh_/g) ?? []).length, 2, 'the one new token, in itself and in its URL');
  const after2 = await workflowNamed('orders');
  assert.equal(after2.attributes.version, 2);
  assert.notEqual(after2.attributes.lock_version, before.attributes.lock_version);
  const shop = (w: any) => w.attributes.triggers.find((x: any) => x.key === 'shop');
  assert.equal(shop(after2).id, shop(before).id);
  assert.equal(after2.attributes.steps[1].config.expression, 'steps.shape.amount > 10');
  // The file now names the version it was saved as: the next edit applies too.
  assert.match(fs.readFileSync(file, 'utf8'), lockLine(after2.attributes.lock_version));
  assert.match(edited.stdout, /lock_version is now/);
});

it('a change saved by someone else between get and apply is refused (stale lock_version)', async () => {
  const file = path.join(dir, 'race.yaml');
  assert.equal((await cli(['workflow', 'get', 'orders', '-o', file])).code, 0);
  const current = await workflowNamed('orders');
  // Someone else saves a change through the API.
  const other = await seedAccount(t.deps, tenant, { role: 'admin', scopes: ['api_read', 'api_write'] });
  const otherApi = jsonApi(t, await tokenFor(t, other));
  const a = current.attributes;
  const saved = await otherApi.post(`${API}/workflows/save_builder_state`, {
    data: {
      type: 'workflow_builder_state',
      attributes: {
        is_new_version: false,
        organization_id: tenant.organizationId,
        workflow_id: current.id,
        lock_version: a.lock_version,
        wf_params: { name: a.name, description: 'changed by someone else', is_active: a.is_active },
        step_params: a.steps,
        trigger_params: a.triggers,
      },
    },
  });
  assert.equal(saved.status, 201, saved.text);
  fs.writeFileSync(file, fs.readFileSync(file, 'utf8').replace('steps.shape.amount > 10', 'steps.shape.amount > 20'));
  const r = await cli(['workflow', 'apply', '-f', file]);
  assert.equal(r.code, 1, r.stdout + r.stderr);
  assert.match(
    r.stderr,
    /^error: the workflow "orders" was saved by someone else since .*race\.yaml's lock_version was read: run `tributary workflow get "orders" --yaml`/,
  );
  assert.match(r.stderr, /\(HTTP 409 stale_lock_version\)\n$/);
  assert.equal((await workflowNamed('orders')).attributes.description, 'changed by someone else');
  const j = await cli(['--json', 'workflow', 'apply', '-f', file]);
  assert.equal(j.code, 1);
  assert.equal(JSON.parse(j.stdout).code, 'stale_lock_version');
});

it('workflow apply of JSON, and workflow list', async () => {
  const file = write(
    'nightly.json',
    JSON.stringify({
      name: 'nightly',
      triggers: { morning: { type: 'schedule', cron: '30 6 * * 1-5', timezone: 'Europe/Berlin' } },
      steps: [{ key: 'shape', type: 'transform', expression: 'payload.scheduled_at' }],
    }),
  );
  const r = await cli(['--json', 'workflow', 'apply', '-f', file]);
  assert.equal(r.code, 0, r.stderr);
  const doc = JSON.parse(r.stdout);
  assert.equal(doc.meta.action, 'created');
  assert.deepEqual(doc.meta.trigger_tokens, {}, 'a schedule has no token');
  const again = await cli(['--json', 'workflow', 'apply', '-f', file]);
  assert.equal(JSON.parse(again.stdout).meta.action, 'unchanged', 'defaults (catch_up) count as given');
  const list = await cli(['workflow', 'list']);
  assert.equal(list.code, 0, list.stderr);
  assert.match(list.stdout, /^id\s+name\s+version/);
  assert.match(list.stdout, /nightly\s+1\s+true\s+morning/);
  assert.match(list.stdout, /orders\s+2\s+true\s+partner, shop/);
});

it('a bad file names the bad member, exit 1, never a stack; usage errors are exit 2', async () => {
  const cases: Array<[string, string, RegExp]> = [
    [
      'bad-member.yaml',
      'name: x\nsteps:\n  a: { type: transform, expression: "1" }\ncolour: red\n',
      /bad-member\.yaml at colour: "colour" is not a member of a workflow file/,
    ],
    ['bad-type.yaml', 'name: x\nsteps:\n  a: { expression: "1" }\n', /bad-type\.yaml at steps\.a\.type: type is required/],
    ['bad-yaml.yaml', 'name: x\nsteps: [\n', /bad-yaml\.yaml: not valid YAML/],
    ['bad-indent.yaml', 'name: x\n  steps: 1\n', /bad-indent\.yaml: not valid YAML \(line 1, column 7\): Nested mappings/],
    ['bad-json.json', '{"name": ', /bad-json\.json: not valid JSON/],
    // Checked by the server, pointed back into the file.
    [
      'bad-expr.yaml',
      'name: bad-expr\nsteps:\n  shape: { type: transform, expression: "(" }\n',
      /bad-expr\.yaml at steps\.shape\.expression: expression .*\(HTTP 422 invalid_request\)/,
    ],
    [
      'bad-field.yaml',
      'name: bad-field\nsteps:\n  store: { type: write_fact, data_model_slug: orders, mapping: { nope: payload.x } }\n',
      /bad-field\.yaml at steps\.store\.mapping\.nope: "nope" is not a field of the data model orders/,
    ],
    [
      'bad-cron.yaml',
      'name: bad-cron\ntriggers:\n  t: { type: schedule, cron: "not a cron" }\nsteps:\n  a: { type: transform, expression: "1" }\n',
      /bad-cron\.yaml at triggers\.t\.cron: /,
    ],
    [
      'bad-accept.yaml',
      'name: bad-accept\ntriggers:\n  slash: { type: webhook, accept: multipart }\nsteps:\n  a: { type: transform, expression: "1" }\n',
      /bad-accept\.yaml at triggers\.slash\.accept: accept must be one of json, form/,
    ],
  ];
  for (const [name, text, message] of cases) {
    const r = await cli(['workflow', 'apply', '-f', write(name, text)]);
    assert.equal(r.code, 1, `${name}: ${r.stdout}${r.stderr}`);
    assert.match(r.stderr, message, name);
    assert.equal(r.stderr.split('\n').length, 2, `one line: ${r.stderr}`);
    assert.ok(!/\n\s+at /.test(r.stderr), 'no stack');
  }
  const model = await cli(['data-model', 'apply', '-f', write('bad-model.yaml', 'slug: orders\nfields:\n  amount: { type: money }\n')]);
  assert.equal(model.code, 1, model.stderr);
  assert.match(model.stderr, /bad-model\.yaml at fields\.amount\.type: type must be one of/);
  const missing = await cli(['workflow', 'apply', '-f', path.join(dir, 'nope.yaml')]);
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /^error: cannot read .*nope\.yaml: no such file\n$/);
  const usage = await cli(['workflow', 'apply']);
  assert.equal(usage.code, 2);
  assert.match(usage.stderr, /required option '-f, --file <file>' not specified/);
  const unknown = await cli(['workflow', 'get', 'no-such-workflow']);
  assert.equal(unknown.code, 1);
  assert.match(unknown.stderr, /no workflow named "no-such-workflow"/);
});

it('a webhook with accept: form round-trips through get --yaml; the default json is left out of the file', async () => {
  const file = write(
    'slash.yaml',
    'name: slash\ntriggers:\n  slash: { type: webhook, accept: form }\n  api: { type: webhook }\nsteps:\n  a: { type: transform, expression: payload }\n',
  );
  const first = await cli(['workflow', 'apply', '-f', file]);
  assert.equal(first.code, 0, first.stderr);
  const wf = await workflowNamed('slash');
  assert.deepEqual(
    wf.attributes.triggers.map((x: any) => [x.key, x.accept]),
    [
      ['slash', 'form'],
      ['api', 'json'],
    ],
  );
  const got = await cli(['workflow', 'get', 'slash', '--yaml']);
  assert.equal(got.code, 0, got.stderr);
  assert.match(got.stdout, /\n {2}slash:\n {4}type: webhook\n(?: {4}\S.*\n)*? {4}accept: form\n/);
  assert.ok(!/accept: json/.test(got.stdout), got.stdout);
  const gotFile = write('slash-got.yaml', got.stdout);
  const again = await cli(['--json', 'workflow', 'apply', '-f', gotFile]);
  assert.equal(again.code, 0, again.stderr);
  assert.equal(JSON.parse(again.stdout).meta.action, 'unchanged');
  assert.equal((await workflowNamed('slash')).attributes.lock_version, wf.attributes.lock_version);
  // Back to JSON only: a change, saved over the same version, the token kept.
  const back = await cli(['--json', 'workflow', 'apply', '-f', write('slash-json.yaml', got.stdout.replace('    accept: form\n', ''))]);
  assert.equal(back.code, 0, back.stderr);
  assert.equal(JSON.parse(back.stdout).meta.action, 'updated');
  const after = await workflowNamed('slash');
  assert.equal(after.attributes.triggers[0].accept, 'json');
  assert.equal(after.attributes.triggers[0].id, wf.attributes.triggers[0].id);
  assert.equal(after.attributes.version, 1);
});

it('nested steps and on_failure round-trip through get --yaml; a nested error names its member in the file', async () => {
  const text = `name: router
steps:
  route:
    type: switch
    cases:
      - when: delivery.headers."x-github-event" = "push"
        steps:
          on_push: { type: transform, expression: payload.ref }
      - when: delivery.headers."x-github-event" = "issues"
        steps:
          each_label:
            type: for_each
            items: payload.issue.labels
            concurrency: 2
            steps:
              label: { type: transform, expression: item.name }
    default:
      ignored: { type: transform, expression: '"ignored"' }
  after: { type: transform, expression: steps.route }
on_failure:
  note: { type: transform, expression: failure.step }
`;
  const first = await cli(['workflow', 'apply', '-f', write('router.yaml', text)]);
  assert.equal(first.code, 0, first.stderr);
  const wf = await workflowNamed('router');
  const route = wf.attributes.steps[0];
  assert.deepEqual(route.config.cases[1].steps[0].config.steps, [{ key: 'label', type: 'transform', config: { expression: 'item.name' } }]);
  assert.deepEqual(route.config.default, [{ key: 'ignored', type: 'transform', config: { expression: '"ignored"' } }]);
  assert.deepEqual(wf.attributes.on_failure, [{ key: 'note', type: 'transform', config: { expression: 'failure.step' } }]);
  const got = await cli(['workflow', 'get', 'router', '--yaml']);
  assert.equal(got.code, 0, got.stderr);
  assert.match(got.stdout, /\n {10}each_label:\n {12}type: for_each\n/);
  assert.match(got.stdout, /\non_failure:\n {2}note:\n/);
  const again = await cli(['--json', 'workflow', 'apply', '-f', write('router-got.yaml', got.stdout)]);
  assert.equal(again.code, 0, again.stderr);
  assert.equal(JSON.parse(again.stdout).meta.action, 'unchanged', got.stdout);
  const bad = await cli(['workflow', 'apply', '-f', write('router-bad.yaml', text.replace('expression: item.name', 'expression: steps.on_push'))]);
  assert.equal(bad.code, 1);
  assert.match(bad.stderr, /router-bad\.yaml at steps\.route\.cases\[1\]\.steps\.each_label\.steps\.label\.expression: steps\.on_push/);
});

it('finds the account in DATA_DIR/bootstrap.json by default, or in --credentials FILE; never prints the secret', async () => {
  const dataDir = fs.mkdtempSync(path.join(dir, 'data-'));
  const creds = JSON.stringify({
    organization_id: tenant.organizationId,
    credential_id: tenant.credentialId,
    client_id: tenant.clientId,
    client_secret: tenant.clientSecret,
  });
  fs.writeFileSync(path.join(dataDir, 'bootstrap.json'), creds);
  const bare = env({ DATA_DIR: dataDir });
  delete bare.TRIBUTARY_CLIENT_ID;
  delete bare.TRIBUTARY_CLIENT_SECRET;
  const viaBootstrap = await runCli(['--url', t.url, 'workflow', 'list'], bare);
  assert.equal(viaBootstrap.code, 0, viaBootstrap.stderr);
  assert.match(viaBootstrap.stdout, /orders/);

  const elsewhere = write('creds.json', creds);
  const noFile = { ...bare, DATA_DIR: path.join(dir, 'empty') };
  const viaOption = await runCli(['--url', t.url, '--credentials', elsewhere, 'workflow', 'list'], noFile);
  assert.equal(viaOption.code, 0, viaOption.stderr);
  const none = await runCli(['--url', t.url, 'workflow', 'list'], noFile);
  assert.equal(none.code, 2);
  assert.match(none.stderr, /^error: no client credentials: cannot read .*bootstrap\.json \(no such file\); pass --credentials FILE/);

  const wrong = await cli(['workflow', 'list'], { TRIBUTARY_CLIENT_SECRET: 'tbcs_not-the-secret' });
  assert.equal(wrong.code, 1);
  assert.match(wrong.stderr, /the server refused the client credentials from TRIBUTARY_CLIENT_ID .*\(HTTP 401 invalid_client\)/);
  for (const r of [viaBootstrap, viaOption, none, wrong]) {
    assert.ok(!(r.stdout + r.stderr).includes(tenant.clientSecret), 'never the secret');
    assert.ok(!(r.stdout + r.stderr).includes('tbcs_not-the-secret'), 'never the secret');
  }
  const half = await cli(['workflow', 'list'], { TRIBUTARY_CLIENT_SECRET: '' });
  assert.equal(half.code, 78);
  assert.match(half.stderr, /TRIBUTARY_CLIENT_SECRET must be set together with the other/);
});

it("docs/workflows.md's quick start files apply as written", async () => {
  const docs = fs.readFileSync(path.join(ROOT, 'docs/workflows.md'), 'utf8');
  const start = docs.indexOf('\n## Quick start: a workflow file\n');
  assert.ok(start >= 0, 'workflows.md starts with the quick start');
  const section = docs.slice(start, docs.indexOf('\n## ', start + 10));
  const [model, workflow] = [...section.matchAll(/^```yaml\n([\s\S]*?)^```$/gm)].map((m) => m[1]!);
  assert.ok(model && workflow);
  // Another workspace, so the names are free.
  const other = await seedTenant(t.deps);
  const as = (args: string[]) => runCli(['--url', t.url, ...args], env({ TRIBUTARY_CLIENT_ID: other.clientId, TRIBUTARY_CLIENT_SECRET: other.clientSecret }));
  const m = await as(['data-model', 'apply', '-f', write('docs-model.yaml', model)]);
  assert.equal(m.code, 0, m.stderr);
  assert.match(m.stdout, /data model orders created/);
  const w = await as(['workflow', 'apply', '-f', write('docs-orders.yaml', workflow)]);
  assert.equal(w.code, 0, w.stderr);
  assert.match(w.stdout, /workflow "orders" created: id \S+, version 1[^]*trigger shop: new token/);
  const again = await as(['--json', 'workflow', 'apply', '-f', path.join(dir, 'docs-orders.yaml')]);
  assert.equal(JSON.parse(again.stdout).meta.action, 'unchanged');
});
