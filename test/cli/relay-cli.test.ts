/**
 * `tributary relay` as its own process: it forwards a provider's delivery without a bearer
 * token, answers /healthz, drains on SIGTERM and exits 0, and logs no secret; without an
 * account it stops with exit code 78.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { it } from 'node:test';
import { ROOT, freePort, runCli } from '../helpers/cli.ts';
import { API, saveOk, startFlow } from '../webhooks/helpers.ts';

it('without an account: exit 78 and the variables to set', async () => {
  const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: '1' };
  for (const name of ['RELAY_CLIENT_ID', 'RELAY_CLIENT_SECRET', 'RELAY_CREDENTIALS_FILE']) delete env[name];
  const r = await runCli(['relay'], env);
  assert.equal(r.code, 78, r.stderr);
  assert.match(r.stderr, /RELAY_CLIENT_ID and RELAY_CLIENT_SECRET, or RELAY_CREDENTIALS_FILE, must be set/);
});

it('forwards a delivery, drains on SIGTERM, logs no secret', async () => {
  const f = await startFlow({}, { worker: false });
  const key = randomBytes(32).toString('base64url');
  const c = await f.api.post(`${API}/external_connectors`, {
    data: { type: 'external_connector', attributes: { name: 'provider', auth_type: 'api_key', direction: 'inbound', secret: key } },
  });
  assert.equal(c.status, 201, c.text);
  const { tokens } = await saveOk(f, {
    step_params: [{ key: 'note', type: 'transform', config: { expression: 'payload' } }],
    trigger_params: [{ key: 'hook', type: 'webhook', service_account_id: f.tenant.credentialId, inbound_connector_id: c.body.data.id }],
  });
  const port = await freePort();
  const child = spawn(process.execPath, ['src/main.ts', 'relay'], {
    cwd: ROOT,
    env: {
      ...process.env,
      RELAY_PORT: String(port),
      RELAY_TARGET_URL: f.t.url,
      RELAY_CLIENT_ID: f.tenant.clientId,
      RELAY_CLIENT_SECRET: f.tenant.clientSecret,
      LOG_FORMAT: 'json',
      LOG_LEVEL: 'debug',
      DATABASE_URL: '',
    },
  });
  let out = '';
  child.stdout.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr.on('data', (b: Buffer) => (out += b.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    try {
      if ((await fetch(`${base}/healthz`)).status === 200) break;
    } catch {
      // not listening yet
    }
    if (i > 200 || child.exitCode !== null) assert.fail(`the relay did not start:\n${out}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const res = await fetch(`${base}/hooks/${tokens.hook}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': key, 'idempotency-key': 'cli-1' },
    body: '{"payload":{"a":1}}',
  });
  const answer = (await res.json()) as { status: string; workflow_run_id: string };
  assert.equal(res.status, 202, JSON.stringify(answer));
  const run = await f.api.get(`${API}/workflow_runs/${answer.workflow_run_id}`);
  assert.equal(run.status, 200, run.text);
  child.kill('SIGTERM');
  assert.equal(await exited, 0, out);
  assert.match(out, /tributary relay listening/);
  assert.match(out, /relay stopped/);
  for (const secret of [f.tenant.clientSecret, tokens.hook!, key]) assert.ok(!out.includes(secret), 'a secret in the log');
  assert.doesNotMatch(out, /tbat_[A-Za-z0-9_-]{8}/);
});
