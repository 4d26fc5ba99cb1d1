/**
 * `tributary connector create|list|verify` and `tributary api-spec import`, run as the real
 * command against a running server, as the tenant's service account (its credentials in a
 * bootstrap.json, as on a first start), calling a mock provider on loopback.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { seedAccount } from '../helpers/app.ts';
import { ROOT, runProcess, type CliRun } from '../helpers/cli.ts';
import { API, startFlow, type Flow } from '../webhooks/helpers.ts';
import { mockProvider, type MockProvider } from '../connectors/mock-provider.ts';

const f: Flow = await startFlow({ ALLOW_PRIVATE_EGRESS: 'true' }, { worker: false });
const mock: MockProvider = await mockProvider();
after(() => mock.close());

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tributary-connector-cli-'));
after(() => fs.rmSync(dir, { recursive: true, force: true }));

/** A data directory whose bootstrap.json holds these credentials. */
function dataDirFor(clientId: string, clientSecret: string): string {
  const d = fs.mkdtempSync(path.join(dir, 'data-'));
  fs.writeFileSync(path.join(d, 'bootstrap.json'), JSON.stringify({ client_id: clientId, client_secret: clientSecret }), { mode: 0o600 });
  return d;
}
const ownerDir = dataDirFor(f.tenant.clientId, f.tenant.clientSecret);

/** `tributary ARGS` with `input` on stdin, as the account of `dataDir`. */
function cli(args: string[], opts: { input?: string; dataDir?: string } = {}): Promise<CliRun> {
  const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: '1', DATA_DIR: opts.dataDir ?? ownerDir, TRIBUTARY_URL: f.t.url };
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
  return runProcess(process.execPath, ['src/main.ts', ...args], ROOT, env, opts.input ?? '');
}

const json = (r: CliRun) => {
  assert.equal(r.code, 0, `exit ${r.code}\n${r.stderr}\n${r.stdout}`);
  return JSON.parse(r.stdout);
};

function file(name: string, text: string): string {
  const p = path.join(dir, name);
  fs.writeFileSync(p, text);
  return p;
}

const SECRET = `sk_live_${'q'.repeat(40)}`;
const SPEC = `openapi: 3.0.3
info: {title: Shop, version: '2'}
paths:
  /health:
    get:
      operationId: getHealth
      responses: {'200': {description: ok}}
  /orders:
    get:
      operationId: listOrders
      responses: {'200': {description: ok}}
`;

describe('connector create', () => {
  it('creates an http connector with the secret from a file; the secret is sent to the provider, never printed', async () => {
    const secretFile = file('key.txt', `${SECRET}\n`);
    const r = json(
      await cli(['--json', 'connector', 'create', '--name', 'Shop', '--auth', 'bearer_token', '--base-url', `${mock.url}/shop`, '--secret-file', secretFile]),
    );
    assert.equal(r.name, 'Shop');
    assert.equal(r.type, 'http');
    assert.equal(r.auth_type, 'bearer_token');
    assert.equal(r.has_secret, true);
    assert.deepEqual(r.config, { base_url: `${mock.url}/shop` });
    assert.ok(!JSON.stringify(r).includes(SECRET));
    // The stored secret is the file's text less its line ending: the provider gets exactly it.
    mock.script('/shop/', { status: 200, body: {} });
    assert.equal(json(await cli(['--json', 'connector', 'verify', r.id])).status, 'verified');
    assert.equal(mock.requests.at(-1)!.headers.authorization, `Bearer ${SECRET}`);
  });

  it('reads the secret from stdin with -, and the config from a YAML file under the options', async () => {
    const config = file('s3.yaml', 'region: eu-west-1\nbucket: exports\naccess_key_id: AKIAEXAMPLE\nforce_path_style: false\n');
    const r = json(
      await cli(
        [
          '--json',
          'connector',
          'create',
          '--name',
          'Exports',
          '--type',
          's3',
          '--auth',
          'api_key',
          '--config-file',
          config,
          '--set',
          'force_path_style=true',
          '--set',
          `endpoint=${mock.url}`,
          '--secret-file',
          '-',
        ],
        { input: 'the-secret-access-key\n' },
      ),
    );
    assert.equal(r.type, 's3');
    assert.deepEqual(r.config, { region: 'eu-west-1', bucket: 'exports', access_key_id: 'AKIAEXAMPLE', force_path_style: true, endpoint: mock.url });
    assert.equal(r.has_secret, true);
  });

  it('takes no secret on the command line, and says what is missing or wrong', async () => {
    const argvSecret = await cli(['connector', 'create', '--name', 'x', '--auth', 'api_key', '--secret', SECRET]);
    assert.equal(argvSecret.code, 2);
    assert.match(argvSecret.stderr, /unknown option '--secret'/);
    const noAuth = await cli(['connector', 'create', '--name', 'x']);
    assert.equal(noAuth.code, 2);
    assert.match(noAuth.stderr, /--auth is required/);
    const missing = await cli(['connector', 'create', '--name', 'x', '--auth', 'api_key', '--secret-file', path.join(dir, 'nope.txt')]);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /cannot read the secret .*nope\.txt: no such file/);
    const refused = await cli(['--json', 'connector', 'create', '--name', 'x', '--auth', 'none', '--base-url', 'ftp://example.com']);
    assert.equal(refused.code, 1);
    const doc = JSON.parse(refused.stdout);
    assert.equal(doc.status, 422);
    assert.equal(doc.source.pointer, '/data/attributes/config/base_url');
    const badYaml = await cli(['connector', 'create', '--name', 'x', '--auth', 'none', '--config-file', file('bad.yaml', '- a list\n- not an object\n')]);
    assert.equal(badYaml.code, 2);
    assert.match(badYaml.stderr, /must hold one object/);
  });

  it('takes the account from --credentials too, and says so when it has none', async () => {
    const creds = file('creds.json', JSON.stringify({ client_id: f.tenant.clientId, client_secret: f.tenant.clientSecret }));
    const empty = fs.mkdtempSync(path.join(dir, 'empty-'));
    const listed = await cli(['--json', '--credentials', creds, 'connector', 'list'], { dataDir: empty });
    assert.equal(listed.code, 0, listed.stderr);
    const none = await cli(['connector', 'list'], { dataDir: empty });
    assert.equal(none.code, 2);
    assert.match(none.stderr, /^error: no client credentials: cannot read .*bootstrap\.json \(no such file\); pass --credentials FILE/);
    const wrong = await cli(['connector', 'list', '--json'], { dataDir: dataDirFor(f.tenant.clientId, 'not-the-secret') });
    assert.equal(wrong.code, 1);
    assert.match(JSON.parse(wrong.stdout).error, /^the server refused the client credentials from .*bootstrap\.json/);
  });

  it("is refused for a member's account (403), as the API refuses it", async () => {
    const member = await seedAccount(f.t.deps, f.tenant, { role: 'member' });
    const r = await cli(['connector', 'create', '--name', 'x', '--auth', 'none', '--base-url', mock.url], {
      dataDir: dataDirFor(member.clientId, member.clientSecret),
    });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /^error: .*\(HTTP 403 forbidden\)/);
  });
});

describe('connector verify, api-spec import', () => {
  it('verify on an inbound connector exits 1 with the text: its deliveries verify it; list shows its direction', async () => {
    const created = await f.api.post(`${API}/external_connectors`, {
      data: {
        type: 'external_connector',
        attributes: { name: 'GitHub hooks', auth_type: 'hmac', direction: 'inbound', secret: 'gh-secret-0123456789', config: { signature_scheme: 'github' } },
      },
    });
    assert.equal(created.status, 201, created.text);
    const r = await cli(['connector', 'verify', created.body.data.id]);
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.match(r.stderr, /^error: An inbound connector is verified by its deliveries, not by a call: .*\(HTTP 422 invalid_request\)/);
    assert.equal(r.stdout, '');
    const listed = await cli(['connector', 'list']);
    assert.equal(listed.code, 0, listed.stderr);
    assert.match(listed.stdout.split('\n')[0]!, /\bdirection\b/);
    assert.match(
      listed.stdout.split('\n').find((l) => l.includes('GitHub hooks'))!,
      /\binbound\b/,
    );
  });

  it('verify names the URL it called and exits 1 while failing; with health_operation, a spec attached by api-spec import is used', async () => {
    const created = json(
      await cli([
        '--json',
        'connector',
        'create',
        '--name',
        'Orders',
        '--auth',
        'none',
        '--base-url',
        `${mock.url}/orders-api`,
        '--health-operation',
        'getHealth',
      ]),
    );
    const before = mock.requests.length;
    const failing = await cli(['connector', 'verify', created.id]);
    assert.equal(failing.code, 1, failing.stdout + failing.stderr);
    assert.match(failing.stdout, /status: failing/);
    assert.equal(failing.stderr, 'error: the connector is failing: see last_error\n');
    assert.match(failing.stdout, /last_error: config\.health_operation is "getHealth", but the connector has no api_spec attached/);
    assert.equal(mock.requests.length, before, 'nothing is called while the health operation cannot be found');

    const spec = json(await cli(['--json', 'api-spec', 'import', file('shop.yaml', SPEC), '--connector', created.id]));
    assert.equal(spec.name, 'shop');
    assert.equal(spec.format, 'yaml');
    assert.equal(spec.external_connector_id, created.id);
    assert.deepEqual(
      spec.operations.map((o: { operation_ref: string }) => o.operation_ref),
      ['getHealth', 'listOrders'],
    );
    assert.ok(!('raw_document' in spec));
    // Attached as the API attaches it: the api_spec's external_connector_id.
    const listed = await f.api.get(`${API}/api_specs?filter[external_connector_id]=${created.id}`);
    assert.deepEqual(
      listed.body.data.map((s: { id: string }) => s.id),
      [spec.id],
    );

    mock.script('/orders-api/health', { status: 503, body: 'down' }, { status: 200, body: { up: true } });
    const down = await cli(['--json', 'connector', 'verify', created.id]);
    assert.equal(down.code, 1);
    assert.equal(down.stderr, '');
    assert.equal(JSON.parse(down.stdout).last_error, `GET ${mock.url}/orders-api/health: The provider answered 503`);
    const up = await cli(['connector', 'verify', created.id]);
    assert.equal(up.code, 0, up.stderr);
    assert.match(up.stdout, /status: verified/);
    assert.equal(`${mock.requests.at(-1)!.method} ${mock.requests.at(-1)!.path}`, 'GET /orders-api/health');
  });

  it('import prints the operations; a bad document is 422 with its pointer; an unknown connector is refused', async () => {
    const human = await cli([
      'api-spec',
      'import',
      file('plain.json', JSON.stringify({ openapi: '3.0.3', info: { title: 'P', version: '1' }, paths: {} })),
      '--name',
      'Plain',
    ]);
    assert.equal(human.code, 0, human.stderr);
    assert.match(human.stdout, /name: Plain\n/);
    assert.match(human.stdout, /operations: 0\n/);
    const bad = await cli(['api-spec', 'import', file('bad.yaml', 'openapi: 3.0.3\npaths: 7\n')]);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /at \/data\/attributes\/raw_document \(HTTP 422/);
    const nobody = await cli(['api-spec', 'import', file('shop2.yaml', SPEC), '--connector', '00000000-0000-7000-8000-000000000000']);
    assert.equal(nobody.code, 1);
    assert.match(nobody.stderr, /external_connector_id does not name an external connector of this workspace/);
    const unread = await cli(['api-spec', 'import', path.join(dir, 'missing.yaml')]);
    assert.equal(unread.code, 1);
    assert.match(unread.stderr, /cannot read the document .*missing\.yaml: no such file/);
  });

  it('verify of an unknown id is 404; list shows the connectors with their status, narrowed by --status', async () => {
    const unknown = await cli(['--json', 'connector', 'verify', '00000000-0000-7000-8000-000000000000']);
    assert.equal(unknown.code, 1);
    assert.equal(JSON.parse(unknown.stdout).status, 404);
    const all = json(await cli(['--json', 'connector', 'list']));
    assert.ok(all.data.length >= 3);
    assert.equal(all.has_more, false);
    assert.ok(all.data.every((c: Record<string, unknown>) => !('secret' in c)));
    const failing = json(await cli(['--json', 'connector', 'list', '--status', 'failing']));
    assert.ok(failing.data.length < all.data.length);
    assert.ok(failing.data.every((c: { status: string }) => c.status === 'failing'));
    const table = await cli(['connector', 'list', '--limit', '1']);
    assert.equal(table.code, 0, table.stderr);
    assert.match(table.stdout, /^id +name +type +auth_type +direction +status +last_verified_at +last_error\n/);
    assert.equal(table.stdout.trim().split('\n').length, 2);
    assert.match(table.stderr, /note: there are more than 1/);
  });
});
