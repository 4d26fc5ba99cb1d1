/**
 * `npm run demo`: the main job end to end on a fresh, temporary data directory. Starts the
 * server, creates a data model, saves a workflow whose webhook trigger sits behind a
 * Standard Webhooks (HMAC) inbound connector, sends signed deliveries (one repeated, one
 * that does not fit the model, one through the relay without a bearer token, as a provider
 * would), waits for the runs and prints the facts through factQuery.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Webhook } from 'standardwebhooks';
import { freePort } from '../test/helpers/cli.ts';

const ROOT = path.resolve(import.meta.dirname, '..');
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tributary-demo-'));
const say = (line: string) => process.stdout.write(`${line}\n`);

const port = await freePort();
const relayPort = await freePort();
const base = `http://127.0.0.1:${port}`;
const relayBase = `http://127.0.0.1:${relayPort}`;
let serverLog = '';
const server = spawn(process.execPath, ['src/main.ts', 'serve'], {
  cwd: ROOT,
  env: {
    ...process.env,
    DATA_DIR: dataDir,
    PORT: String(port),
    RELAY_PORT: String(relayPort),
    LOG_LEVEL: 'warn',
    LOG_FORMAT: 'json',
    DATABASE_URL: '',
    REDIS_URL: '',
  },
});
server.stdout.on('data', (c: Buffer) => (serverLog += c.toString()));
server.stderr.on('data', (c: Buffer) => (serverLog += c.toString()));

async function stop(code: number): Promise<never> {
  if (server.exitCode === null) {
    const exited = new Promise((resolve) => server.once('exit', resolve));
    server.kill('SIGTERM');
    await exited;
  }
  fs.rmSync(dataDir, { recursive: true, force: true });
  process.exit(code);
}

async function call(method: string, p: string, body: unknown, bearer: string): Promise<any> {
  const res = await fetch(`${base}${p}`, {
    method,
    headers: { authorization: `Bearer ${bearer}`, accept: 'application/vnd.api+json', 'content-type': 'application/vnd.api+json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = await res.json();
  if (res.status >= 300) throw new Error(`${method} ${p}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

try {
  say(`Starting the server on ${base} with a fresh data directory ${dataDir}`);
  // A fresh data directory runs initdb and every migration first: on a slow or busy machine
  // that is tens of seconds. A server that exits is reported at once, whatever the deadline.
  const deadline = Date.now() + 120_000;
  for (;;) {
    if (server.exitCode !== null) throw new Error(`the server exited:\n${serverLog}`);
    try {
      if ((await fetch(`${base}/readyz`)).status === 200) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`the server did not start:\n${serverLog}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }

  const boot = JSON.parse(fs.readFileSync(path.join(dataDir, 'bootstrap.json'), 'utf8'));
  const tokenRes = await fetch(`${base}/api/v1/oauth/token`, {
    method: 'POST',
    body: new URLSearchParams({ grant_type: 'client_credentials', client_id: boot.client_id, client_secret: boot.client_secret }),
  });
  const bearer = ((await tokenRes.json()) as { access_token: string }).access_token;
  say('1. Exchanged the bootstrap client credentials for a bearer token');

  const model = await call('POST', '/api/json/v1/data_models', { data: { type: 'data_model', attributes: { name: 'Orders', slug: 'orders' } } }, bearer);
  for (const field of [
    { name: 'order_id', type: 'string', is_primary_key: true },
    { name: 'amount', type: 'float', is_required: true },
    { name: 'status', type: 'string' },
  ]) {
    await call(
      'POST',
      '/api/json/v1/data_model_fields',
      { data: { type: 'data_model_field', attributes: { data_model_id: model.data.id, ...field } } },
      bearer,
    );
  }
  say('2. Created the data model "orders" (order_id, amount, status)');

  const secret = `whsec_${randomBytes(32).toString('base64')}`;
  const connector = await call(
    'POST',
    '/api/json/v1/external_connectors',
    { data: { type: 'external_connector', attributes: { name: 'Shop webhooks', auth_type: 'hmac', direction: 'inbound', secret } } },
    bearer,
  );
  say('3. Created an inbound HMAC connector (Standard Webhooks) with a whsec_ secret');

  const saved = await call(
    'POST',
    '/api/json/v1/workflows/save_builder_state',
    {
      data: {
        type: 'workflow_builder_state',
        attributes: {
          is_new_version: false,
          organization_id: boot.organization_id,
          wf_params: { name: 'Shop orders', is_active: true },
          step_params: [
            {
              key: 'shape',
              type: 'transform',
              config: { expression: '{"order_id": payload.order.id, "amount": payload.order.total, "status": $lowercase(payload.order.status)}' },
            },
            { key: 'real', type: 'condition', config: { expression: '$not($exists(payload.test) and payload.test)' } },
            { key: 'store', type: 'write_fact', config: { data_model_slug: 'orders', data: 'steps.shape', observed_at: 'payload.order.updated_at' } },
          ],
          trigger_params: [{ key: 'shop', type: 'webhook', service_account_id: boot.credential_id, inbound_connector_id: connector.data.id }],
        },
      },
    },
    bearer,
  );
  const hook = `${base}/api/v1/webhooks/${saved.meta.trigger_tokens.shop}`;
  // What a provider is given: the relay's URL, which holds the bootstrap account's bearer token for it.
  const relayHook = `${relayBase}/hooks/${saved.meta.trigger_tokens.shop}`;
  say('4. Saved the workflow "Shop orders": transform -> condition -> write_fact, behind a webhook trigger');

  const signer = new Webhook(secret);
  const send = async (id: string, payload: unknown) => {
    const body = JSON.stringify({ payload });
    const at = new Date();
    // evt_3 comes as a provider sends it: to the relay, with its signature and no bearer token.
    const viaRelay = id === 'evt_3';
    const res = await fetch(viaRelay ? relayHook : hook, {
      method: 'POST',
      headers: {
        ...(viaRelay ? {} : { authorization: `Bearer ${bearer}` }),
        'content-type': 'application/json',
        'idempotency-key': id,
        'webhook-id': id,
        'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
        'webhook-signature': signer.sign(id, at, body),
      },
      body,
    });
    const answer = (await res.json()) as { status: string; workflow_run_id?: string };
    say(`   ${id}${viaRelay ? ' (through the relay, no bearer token)' : ''}: ${res.status} ${JSON.stringify(answer)}`);
    return answer;
  };
  say('5. Sending signed deliveries (evt_1 twice: the second is a duplicate; evt_4 has total "lots", not a number: its run fails on purpose)');
  const runIds: string[] = [];
  for (const [id, order] of [
    ['evt_1', { id: 'A-100', total: 42.5, status: 'PAID', updated_at: '2026-11-20T09:00:00Z' }],
    ['evt_2', { id: 'A-101', total: 10, status: 'OPEN', updated_at: '2026-11-20T09:05:00Z' }],
    ['evt_3', { id: 'A-100', total: 42.5, status: 'SHIPPED', updated_at: '2026-11-21T14:30:00Z' }],
    ['evt_1', { id: 'A-100', total: 42.5, status: 'PAID', updated_at: '2026-11-20T09:00:00Z' }],
    ['evt_4', { id: 'A-102', total: 'lots', status: 'OPEN', updated_at: '2026-11-21T15:00:00Z' }],
  ] as const) {
    const answer = await send(id, { order });
    if (answer.workflow_run_id) runIds.push(answer.workflow_run_id);
  }

  say('6. Waiting for the runs');
  const outcomes: string[] = [];
  for (const id of runIds) {
    for (;;) {
      const run = await call('GET', `/api/json/v1/workflow_runs/${id}`, undefined, bearer);
      const a = run.data.attributes;
      if (a.status === 'succeeded' || a.status === 'failed') {
        say(`   run ${id} (${a.delivery_id}): ${a.status}${a.error ? ` - ${a.error}` : ''}`);
        outcomes.push(a.status);
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  if (outcomes.join() !== 'succeeded,succeeded,succeeded,failed') throw new Error(`unexpected run outcomes: ${outcomes.join(', ')}`);
  say('7. The facts, through GraphQL factQuery');
  for (const mode of ['latest', 'timeline']) {
    const res = await fetch(`${base}/api/graphql`, {
      method: 'POST',
      headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        query: `{ factQuery(dataModelSlug: "orders", mode: "${mode}", sortDirection: "asc", since: "2026-11-01T00:00:00Z") { count results { entityId observedAt data } } }`,
      }),
    });
    const body = (await res.json()) as any;
    if (!body.data?.factQuery) throw new Error(`factQuery failed: ${JSON.stringify(body)}`);
    say(`   ${mode}: ${body.data.factQuery.count} facts`);
    if (body.data.factQuery.count !== (mode === 'latest' ? 2 : 3)) throw new Error(`expected ${mode === 'latest' ? 2 : 3} facts in ${mode} mode`);
    for (const r of body.data.factQuery.results) say(`     ${r.entityId}  ${r.observedAt}  ${r.data}`);
  }
  say('Done: deliveries became runs, runs became facts. The run of evt_4 failed as intended: a fact is checked against its data model.');
  say('Next: the README\'s "Your first task" (the same with your own models, from a shell), then docs/workflows.md');
  say('(steps, run states, replaying a failed run) and docs/webhooks.md (signing, duplicates, the relay).');
  await stop(0);
} catch (err) {
  process.stderr.write(`demo failed: ${err instanceof Error ? err.message : String(err)}\n`);
  await stop(1);
}
