/**
 * The real `tributary` CLI as a child process against a running app: every admin command
 * with --json prints exactly one JSON document, and failures exit non-zero.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { adminCall, dataModelDoc, jsonApi, startApp, tokenFor, type TestApp } from '../helpers/app.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const NODE = path.join(ROOT, 'node_modules/.bin/node');
const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** The environment of the parent without any Tributary setting, so only what a test passes counts. */
function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!/^(TRIBUTARY_|PORT$|HOST$|DATA_DIR$|DATABASE_URL$|REDIS_URL$|LOG_LEVEL$)/.test(k)) env[k] = v;
  }
  return { ...env, ...extra };
}

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** At most two CLI processes at a time, so a loaded machine does not push one past its timeout. */
let running = 0;
const waiting: Array<() => void> = [];

async function spawnCli(args: string[], env: NodeJS.ProcessEnv = cleanEnv()): Promise<Run> {
  if (running >= 2) await new Promise<void>((r) => waiting.push(r));
  running++;
  try {
    return await new Promise((resolve, reject) => {
      execFile(NODE, ['src/main.ts', ...args], { cwd: ROOT, env, timeout: 60_000 }, (err, stdout, stderr) => {
        if (err && typeof (err as { code?: unknown }).code !== 'number') return reject(err);
        resolve({ code: err ? (err as { code: number }).code : 0, stdout, stderr });
      });
    });
  } finally {
    running--;
    waiting.shift()?.();
  }
}

let t: TestApp;
let closedUrl: string;

/** `tributary ARGS --json --url <app> --admin-token <token>` */
function cli(args: string[], opts: { token?: string; url?: string; json?: boolean } = {}): Promise<Run> {
  return spawnCli([...args, ...(opts.json === false ? [] : ['--json']), '--url', opts.url ?? t.url, '--admin-token', opts.token ?? t.adminToken]);
}

/** stdout must be exactly one JSON document (one line). */
function one(run: Run): any {
  assert.equal(run.stdout.endsWith('\n'), true, `stdout: ${JSON.stringify(run.stdout)} stderr: ${run.stderr}`);
  assert.equal(run.stdout.trimEnd().split('\n').length, 1, `more than one line on stdout: ${run.stdout}`);
  return JSON.parse(run.stdout);
}

function ok(run: Run): any {
  assert.equal(run.code, 0, `exit ${run.code}; stdout: ${run.stdout} stderr: ${run.stderr}`);
  return one(run);
}

/** A sweep result: a count per kind of deleted row (`*_deleted`), each a whole number. */
function assertCounts(result: Record<string, unknown>): void {
  const keys = Object.keys(result);
  assert.ok(keys.includes('idempotency_keys_deleted'), keys.join());
  for (const k of keys) {
    assert.match(k, /_deleted$/);
    assert.equal(Number.isInteger(result[k]) && (result[k] as number) >= 0, true, `${k}: ${String(result[k])}`);
  }
}

async function exchange(clientId: string, clientSecret: string): Promise<{ status: number; body: any }> {
  const res = await fetch(`${t.url}/api/v1/oauth/token`, {
    method: 'POST',
    body: new URLSearchParams({ grant_type: 'client_credentials', client_id: clientId, client_secret: clientSecret }),
  });
  return { status: res.status, body: await res.json() };
}

before(async () => {
  t = await startApp();
  const srv = net.createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  closedUrl = `http://127.0.0.1:${(srv.address() as net.AddressInfo).port}`;
  await new Promise<void>((r) => srv.close(() => r()));
});

after(async () => {
  await t.close();
});

test('every admin command end to end, each printing one JSON document', async () => {
  const suffix = `${process.pid}-${Date.now()}`;
  const domain = `cli-${suffix}.example`;

  const [org, human] = await Promise.all([
    cli(['org', 'create', '--name', 'CLI Org', '--domain', domain]).then(ok),
    cli(['org', 'create', '--name', 'Human Org', '--domain', `human-${suffix}.example`], { json: false }),
  ]);
  assert.match(org.id, UUID_RE);
  assert.equal(org.name, 'CLI Org');
  assert.equal(org.domain, domain);

  // Without --json: key: value lines.
  assert.equal(human.code, 0, human.stderr);
  const lines = human.stdout.trimEnd().split('\n');
  assert.match(lines[0]!, /^id: [0-9a-f-]{36}$/);
  assert.equal(lines[1], 'name: Human Org');
  assert.equal(lines[2], `domain: human-${suffix}.example`);
  assert.throws(() => JSON.parse(human.stdout));

  const dupAgain = await cli(['org', 'create', '--name', 'Again', '--domain', domain.toUpperCase()]);
  assert.equal(dupAgain.code, 1);
  assert.deepEqual(one(dupAgain), {
    error: 'an organization with this domain already exists',
    status: 422,
    code: 'invalid_request',
    source: { pointer: '/domain' },
  });

  const ws = ok(await cli(['workspace', 'create', '--org', org.id, '--name', 'Main WS']));
  assert.match(ws.id, UUID_RE);
  assert.equal(ws.organization_id, org.id);
  assert.equal(ws.name, 'Main WS');

  const user = ok(
    await cli(['user', 'create', '--email', `ada-${suffix}@example.com`, '--first-name', 'Ada', '--last-name', 'Lovelace', '--timezone', 'Europe/London']),
  );
  assert.match(user.id, UUID_RE);
  assert.equal(user.email, `ada-${suffix}@example.com`);
  assert.equal(user.first_name, 'Ada');
  assert.equal(user.last_name, 'Lovelace');
  assert.equal(user.timezone, 'Europe/London');

  const membership = ok(await cli(['member', 'add', '--org', org.id, '--user', user.id, '--role', 'admin']));
  assert.match(membership.id, UUID_RE);
  assert.equal(membership.organization_id, org.id);
  assert.equal(membership.user_id, user.id);
  assert.equal(membership.role, 'admin');
  assert.equal(membership.is_active, true);

  const cred = ok(await cli(['credential', 'create', '--workspace', ws.id, '--run-as', membership.id, '--name', 'etl', '--scopes', 'api_read,api_write']));
  assert.match(cred.id, UUID_RE);
  assert.equal(cred.workspace_id, ws.id);
  assert.equal(cred.organization_id, org.id);
  assert.equal(cred.run_as_membership_id, membership.id);
  assert.equal(cred.name, 'etl');
  assert.deepEqual(cred.scopes, ['api_read', 'api_write']);
  assert.equal(cred.is_active, true);
  assert.match(cred.client_id, /^tbci_/);
  assert.match(cred.client_secret, /^tbcs_/);
  assert.equal('secret_hash' in cred, false);

  // The printed secret works at the token endpoint.
  const first = await exchange(cred.client_id, cred.client_secret);
  assert.equal(first.status, 200);
  assert.equal(first.body.scope, 'api_read api_write');

  // A data model in the new workspace, created through the JSON:API with the new credential.
  const api = jsonApi(t, first.body.access_token);
  const dm = await api.post('/api/json/v1/data_models', dataModelDoc({ name: 'Orders', slug: 'orders' }));
  assert.equal(dm.status, 201, dm.text);

  const widget = ok(
    await cli([
      'widget',
      'create',
      '--workspace',
      ws.id,
      '--data-model',
      dm.body.data.id,
      '--kind',
      'number',
      '--position',
      '{"x":1,"y":2,"w":3,"h":4}',
      '--title',
      'Revenue',
      '--config',
      '{"measures":[{"op":"count"}],"unit":"orders"}',
    ]),
  );
  assert.match(widget.id, UUID_RE);
  assert.equal(widget.workspace_id, ws.id);
  assert.equal(widget.organization_id, org.id);
  assert.equal(widget.data_model_id, dm.body.data.id);
  assert.equal(widget.kind, 'number');
  assert.equal(widget.title, 'Revenue');
  assert.equal(widget.dashboard, 'home');
  assert.deepEqual(widget.position, { x: 1, y: 2, w: 3, h: 4 });
  assert.deepEqual(widget.config, { measures: [{ op: 'count' }], unit: 'orders' });

  const narrowed = ok(await cli(['credential', 'update', cred.id, '--scopes', 'api_read']));
  assert.equal(narrowed.id, cred.id);
  assert.deepEqual(narrowed.scopes, ['api_read']);
  assert.equal(narrowed.is_active, true);
  assert.equal('client_secret' in narrowed, false);
  assert.equal('secret_hash' in narrowed, false);
  const second = await exchange(cred.client_id, cred.client_secret);
  assert.equal(second.status, 200);
  assert.equal(second.body.scope, 'api_read');

  const orgs = (token: string) => jsonApi(t, token).get('/api/json/v1/organizations');
  assert.equal((await orgs(second.body.access_token)).status, 200);
  const revoked = ok(await cli(['credential', 'update', cred.id, '--revoke-tokens']));
  assert.equal(revoked.id, cred.id);
  assert.equal((await orgs(second.body.access_token)).status, 401);
  const third = await exchange(cred.client_id, cred.client_secret);
  assert.equal((await orgs(third.body.access_token)).status, 200);

  const off = ok(await cli(['credential', 'update', cred.id, '--active', 'false']));
  assert.equal(off.is_active, false);
  assert.deepEqual(off.scopes, ['api_read']);
  const refused = await exchange(cred.client_id, cred.client_secret);
  assert.equal(refused.status, 401);
  assert.equal(refused.body.error, 'invalid_client');

  const deactivated = ok(await cli(['member', 'deactivate', membership.id]));
  assert.equal(deactivated.id, membership.id);
  assert.equal(deactivated.is_active, false);

  // Two expired idempotency keys for the sweep to delete.
  await t.deps.db
    .insertInto('idempotency_keys')
    .values(
      ['k1', 'k2'].map((key) => ({
        credential_id: cred.id,
        key,
        fingerprint: 'f',
        state: 'done' as const,
        status: 201,
        body: '{}',
        locked_until: sql<Date>`now() - interval '2 days'`,
        expires_at: sql<Date>`now() - interval '1 day'`,
      })),
    )
    .execute();
  const swept = ok(await cli(['sweep']));
  assert.equal(swept.idempotency_keys_deleted, 2);
  assertCounts(swept);
  const left = await t.deps.db.selectFrom('idempotency_keys').select('key').where('credential_id', '=', cred.id).execute();
  assert.deepEqual(left, []);

  // The admin API agrees with what the CLI printed.
  const reread = await adminCall(t, 'PATCH', `/credentials/${cred.id}`, { is_active: true });
  assert.equal(reread.status, 200);
  assert.deepEqual(reread.body.data.scopes, ['api_read']);
});

test('defaults: the URL from PORT and the admin token from DATA_DIR/admin-token', async () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tributary-cli-'));
  try {
    fs.writeFileSync(path.join(dataDir, 'admin-token'), `${t.adminToken}\n`, { mode: 0o600 });
    const port = new URL(t.url).port;
    const run = await spawnCli(['sweep', '--json'], cleanEnv({ DATA_DIR: dataDir, PORT: port }));
    const swept = ok(run);
    assert.equal(swept.idempotency_keys_deleted, 0);
    assertCounts(swept);
    // Same through TRIBUTARY_URL and TRIBUTARY_ADMIN_TOKEN, with a wrong PORT that must not matter.
    const viaEnv = await spawnCli(['sweep', '--json'], cleanEnv({ TRIBUTARY_URL: t.url, TRIBUTARY_ADMIN_TOKEN: t.adminToken, DATA_DIR: dataDir, PORT: '1' }));
    assert.deepEqual(ok(viaEnv), swept);
  } finally {
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
});

test('failures: wrong token, usage errors, unreachable server', async () => {
  const [wrongToken, missing, badRole, nothing, unreachableJson, unreachable, help, credHuman] = await Promise.all([
    cli(['sweep'], { token: 'tbadm_wrong-wrong-wrong-wrong-wrong-wrong' }),
    cli(['org', 'create', '--name', 'No Domain']),
    cli(['member', 'add', '--org', 'o', '--user', 'u', '--role', 'boss']),
    cli(['credential', 'update', '01890000-0000-7000-8000-000000000000']),
    cli(['sweep'], { url: closedUrl }),
    cli(['org', 'create', '--name', 'X', '--domain', 'x.example'], { url: closedUrl, json: false }),
    spawnCli(['org', 'create', '--help', '--json']),
    cli(
      [
        'credential',
        'create',
        '--workspace',
        '01890000-0000-7000-8000-000000000000',
        '--run-as',
        '01890000-0000-7000-8000-000000000001',
        '--name',
        'n',
        '--scopes',
        'api_read',
      ],
      { json: false },
    ),
  ]);

  assert.equal(wrongToken.code, 1);
  assert.deepEqual(one(wrongToken), { error: 'A valid admin token is required', status: 401, code: 'unauthorized' });

  assert.equal(missing.code, 2);
  assert.deepEqual(one(missing), { error: "required option '--domain <domain>' not specified", status: null, code: 'usage_error' });
  assert.equal(missing.stderr, "error: required option '--domain <domain>' not specified\n");

  assert.equal(badRole.code, 2);
  assert.deepEqual(one(badRole), {
    error: "option '--role <role>' argument 'boss' is invalid. Allowed choices are owner, admin, member.",
    status: null,
    code: 'usage_error',
  });

  assert.equal(nothing.code, 2);
  assert.deepEqual(one(nothing), { error: 'nothing to update: pass --scopes, --active, --workspace or --revoke-tokens', status: null, code: 'usage_error' });

  assert.equal(unreachableJson.code, 1);
  assert.deepEqual(one(unreachableJson), { error: `cannot reach the server at ${closedUrl} (ECONNREFUSED)`, status: null, code: 'connection_refused' });

  assert.equal(unreachable.code, 1);
  assert.equal(unreachable.stdout, '');
  assert.equal(unreachable.stderr, `error: cannot reach the server at ${closedUrl} (ECONNREFUSED)\n`);

  // Help asked for goes to stdout (to page or grep it), even with --json; required options are marked.
  assert.equal(help.code, 0);
  assert.equal(help.stderr, '');
  assert.match(help.stdout, /^Usage: tributary org create \[options\]/);
  assert.match(help.stdout, /--name <name> +\(required\) display name/);
  assert.match(help.stdout, /--domain <domain> +\(required\) DNS domain/);

  // Human rendering of an API error names the status, code and pointer.
  assert.equal(credHuman.code, 1);
  assert.equal(credHuman.stdout, '');
  assert.equal(credHuman.stderr, 'error: No workspace with this id (HTTP 404 not_found)\n');
});

test('a created credential is rendered with a one-time warning without --json', async () => {
  const org = await adminCall(t, 'POST', '/organizations', { name: 'Warn', domain: `warn-${process.pid}.example` });
  const ws = await adminCall(t, 'POST', '/workspaces', { organization_id: org.body.data.id, name: 'W' });
  const user = await adminCall(t, 'POST', '/users', { email: `warn-${process.pid}@example.com` });
  const m = await adminCall(t, 'POST', '/memberships', { organization_id: org.body.data.id, user_id: user.body.data.id, role: 'member' });
  const run = await cli(
    ['credential', 'create', '--workspace', ws.body.data.id, '--run-as', m.body.data.id, '--name', 'human', '--scopes', 'embed, webhooks'],
    { json: false },
  );
  assert.equal(run.code, 0, run.stderr);
  const secret = /^client_secret: (tbcs_\S+)$/m.exec(run.stdout)?.[1];
  const clientId = /^client_id: (tbci_\S+)$/m.exec(run.stdout)?.[1];
  assert.ok(secret && clientId, run.stdout);
  assert.match(run.stdout, /^scopes: embed, webhooks$/m);
  assert.match(run.stdout, /\nwarning: the client_secret is shown only this once; store it now, it cannot be retrieved later\.\n$/);
  const token = await tokenFor(t, { clientId, clientSecret: secret });
  assert.match(token, /^tbat_/);
});

test('help, --version and one error prefix', async () => {
  const [version, helpCmd, incomplete, unknown, badConfig, credHelp] = await Promise.all([
    spawnCli(['--version']),
    spawnCli(['widget', 'help', 'create']),
    spawnCli(['widget']),
    spawnCli(['org', 'frobnicate']),
    spawnCli(['org', 'list'], cleanEnv({ PORT: 'x' })),
    spawnCli(['credential', 'update', '--help']),
  ]);
  const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
  assert.deepEqual(version, { code: 0, stdout: `${pkg.version}\n`, stderr: '' });

  assert.equal(helpCmd.code, 0);
  assert.equal(helpCmd.stderr, '');
  assert.match(helpCmd.stdout, /--data-model <slug-or-id> +\(required\)/);
  assert.match(helpCmd.stdout, /--title <title> +title/, 'optional options are not marked');
  assert.match(credHelp.stdout, /--scopes <a,b> +comma-separated/, 'an optional --scopes is not marked');

  // Help shown because a command is incomplete is a usage error: on stderr, exit 2.
  assert.equal(incomplete.code, 2);
  assert.equal(incomplete.stdout, '');
  assert.match(incomplete.stderr, /^Usage: tributary widget/);

  // Every failure line starts with the same "error: ", whoever wrote it.
  assert.equal(unknown.code, 2);
  assert.match(unknown.stderr, /^error: unknown command 'frobnicate'/);
  assert.equal(badConfig.code, 78);
  assert.equal(badConfig.stderr, 'error: Invalid configuration: PORT must be a whole number, got "x"\n');
});

test('list commands and whoami: ids are discoverable, one JSON document each, never a secret', async () => {
  const suffix = `${process.pid}-${Date.now()}`;
  const org = (await adminCall(t, 'POST', '/organizations', { name: 'List Org', domain: `list-${suffix}.example` })).body.data;
  const ws = (await adminCall(t, 'POST', '/workspaces', { organization_id: org.id, name: 'List WS' })).body.data;
  const other = (await adminCall(t, 'POST', '/workspaces', { organization_id: org.id, name: 'Other WS' })).body.data;
  const user = (await adminCall(t, 'POST', '/users', { email: `list-${suffix}@example.com` })).body.data;
  const m = (await adminCall(t, 'POST', '/memberships', { organization_id: org.id, user_id: user.id, role: 'owner' })).body.data;
  const cred = (
    await adminCall(t, 'POST', '/credentials', { workspace_id: ws.id, run_as_membership_id: m.id, name: 'lister', scopes: ['api_read', 'api_write'] })
  ).body.data;
  const token = await tokenFor(t, { clientId: cred.client_id, clientSecret: cred.client_secret });
  const dm = await jsonApi(t, token).post('/api/json/v1/data_models', dataModelDoc({ name: 'Sales', slug: `sales-${process.pid}` }));
  assert.equal(dm.status, 201, dm.text);

  // widget create takes the model's slug, as facts import does, or its id.
  const [bySlug, byId, badSlug] = await Promise.all([
    cli(['widget', 'create', '--workspace', ws.id, '--data-model', `sales-${process.pid}`, '--kind', 'number']).then(ok),
    cli(['widget', 'create', '--workspace', ws.id, '--data-model', dm.body.data.id, '--kind', 'table']).then(ok),
    cli(['widget', 'create', '--workspace', other.id, '--data-model', `sales-${process.pid}`, '--kind', 'number']),
  ]);
  assert.equal(bySlug.data_model_id, dm.body.data.id);
  assert.equal(byId.data_model_id, dm.body.data.id);
  assert.equal(badSlug.code, 1);
  assert.deepEqual(one(badSlug), {
    error: `the workspace has no data model with the slug "sales-${process.pid}"`,
    status: 422,
    code: 'invalid_request',
    source: { pointer: '/data_model' },
  });
  // The config is checked as the JSON:API writes check it: a line needs a bucket.
  const lineWithoutBucket = await cli([
    'widget',
    'create',
    '--workspace',
    ws.id,
    '--data-model',
    dm.body.data.id,
    '--kind',
    'line',
    '--config',
    '{"mode":"timeline"}',
  ]);
  assert.equal(lineWithoutBucket.code, 1);
  assert.equal(one(lineWithoutBucket).source.pointer, '/config/bucket');

  const [orgs, wss, users, members, creds, widgets, models] = await Promise.all([
    cli(['org', 'list', '--limit', '1000']).then(ok),
    cli(['workspace', 'list', '--org', org.id]).then(ok),
    cli(['user', 'list', '--limit', '1000']).then(ok),
    cli(['member', 'list', '--org', org.id]).then(ok),
    cli(['credential', 'list', '--workspace', ws.id]).then(ok),
    cli(['widget', 'list', '--workspace', ws.id]).then(ok),
    cli(['data-model', 'list', '--workspace', ws.id]).then(ok),
  ]);
  assert.ok(orgs.data.some((o: any) => o.id === org.id && o.domain === org.domain));
  assert.deepEqual(
    wss.data.map((w: any) => w.name),
    ['List WS', 'Other WS'],
  );
  assert.equal(wss.has_more, false);
  assert.ok(users.data.some((u: any) => u.id === user.id));
  assert.deepEqual(
    members.data.map((x: any) => [x.id, x.user_email, x.role]),
    [[m.id, user.email, 'owner']],
  );
  assert.deepEqual(
    creds.data.map((c: any) => [c.id, c.client_id]),
    [[cred.id, cred.client_id]],
  );
  for (const c of creds.data)
    assert.deepEqual(
      Object.keys(c).filter((k) => /secret|hash|not_before/.test(k)),
      [],
    );
  assert.doesNotMatch(JSON.stringify(creds), /tbcs_/);
  assert.deepEqual(widgets.data.map((w: any) => w.kind).sort(), ['number', 'table']);
  assert.deepEqual(
    models.data.map((x: any) => [x.id, x.slug]),
    [[dm.body.data.id, `sales-${process.pid}`]],
  );

  // Paging by --limit says there is more; a bad filter is the server's 400 with its parameter.
  const [limited, badFilter, human, moreHuman] = await Promise.all([
    cli(['workspace', 'list', '--org', org.id, '--limit', '1']).then(ok),
    cli(['credential', 'list', '--workspace', 'nope']),
    cli(['member', 'list', '--org', org.id], { json: false }),
    cli(['workspace', 'list', '--org', org.id, '--limit', '1'], { json: false }),
  ]);
  assert.deepEqual([limited.data.length, limited.has_more], [1, true]);
  assert.equal(badFilter.code, 1);
  assert.deepEqual(one(badFilter), { error: 'workspace_id must be an id', status: 400, code: 'invalid_query', source: { parameter: 'workspace_id' } });
  assert.equal(human.code, 0, human.stderr);
  const rows = human.stdout.trimEnd().split('\n');
  assert.match(rows[0]!, /^id +organization_id +user_id +user_email +role +is_active$/);
  assert.equal(rows.length, 2);
  assert.match(rows[1]!, new RegExp(`^${m.id} +${org.id} +${user.id} +${user.email.replace(/\./g, '\\.')} +owner +true$`));
  assert.equal(moreHuman.stdout.trimEnd().split('\n').length, 2);
  assert.equal(moreHuman.stderr, 'note: there are more than 1; pass --limit (at most 1000) or --org\n');

  // whoami: the account of a client id, positional or --client-id.
  const [who, whoOpt, whoHuman, nobody, noArg] = await Promise.all([
    cli(['whoami', cred.client_id]).then(ok),
    cli(['whoami', '--client-id', cred.client_id]).then(ok),
    cli(['whoami', cred.client_id], { json: false }),
    cli(['whoami', 'tbci_nobody']),
    cli(['whoami']),
  ]);
  assert.deepEqual(who, whoOpt);
  assert.equal(who.credential.id, cred.id);
  assert.equal(who.workspace.id, ws.id);
  assert.equal(who.organization.id, org.id);
  assert.equal(who.run_as_membership.id, m.id);
  assert.equal(who.run_as_membership.user_email, user.email);
  assert.deepEqual(who.scopes, ['api_read', 'api_write']);
  assert.doesNotMatch(JSON.stringify(who), /tbcs_|secret|hash/);
  assert.equal(whoHuman.code, 0, whoHuman.stderr);
  assert.match(whoHuman.stdout, new RegExp(`^workspace: ${ws.id} \\(List WS\\)$`, 'm'));
  assert.match(whoHuman.stdout, new RegExp(`^run_as_membership: ${m.id} \\(owner ${user.email.replace(/\./g, '\\.')}\\)$`, 'm'));
  assert.equal(nobody.code, 1);
  assert.deepEqual(one(nobody), { error: 'No service account with this client_id', status: 404, code: 'not_found' });
  assert.equal(noArg.code, 2);
  assert.equal(one(noArg).code, 'usage_error');
});

test('admin list endpoints: 401 without the token, 400 with the parameter for a bad limit, filter or unknown parameter', async () => {
  const noToken = await fetch(`${t.url}/admin/v1/organizations`);
  assert.equal(noToken.status, 401);
  const cases: Array<[string, string]> = [
    ['/workspaces?limit=0', 'limit'],
    ['/workspaces?limit=1001', 'limit'],
    ['/users?limit=1&limit=2', 'limit'],
    ['/memberships?organization_id=x', 'organization_id'],
    ['/data-models?workspace_id=01890000-0000-7000-8000-00000000000z', 'workspace_id'],
    ['/organizations?workspace_id=01890000-0000-7000-8000-000000000000', 'workspace_id'],
    ['/whoami', 'client_id'],
  ];
  for (const [p, parameter] of cases) {
    const res = await adminCall(t, 'GET', p);
    assert.equal(res.status, 400, `${p}: ${res.text}`);
    assert.equal(res.body.errors[0].code, 'invalid_query', p);
    assert.deepEqual(res.body.errors[0].source, { parameter }, p);
  }
  const empty = await adminCall(t, 'GET', '/widgets?workspace_id=01890000-0000-7000-8000-000000000000');
  assert.equal(empty.status, 200);
  assert.deepEqual(empty.body, { data: [], has_more: false });
});
