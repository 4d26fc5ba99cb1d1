/**
 * `workflow apply` names the relay URL of a new trigger's token (`<relay>/hooks/<token>`)
 * when the service knows its relay: the one `serve` runs (RELAY_PORT), or RELAY_PUBLIC_URL.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, it } from 'node:test';
import { loadConfig } from '../../src/config.ts';
import { serve } from '../../src/server.ts';
import { freshPostgresDatabase, seedTenant, startApp } from '../helpers/app.ts';
import { runCli } from '../helpers/cli.ts';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tributary-relay-url-'));
after(() => fs.rmSync(dir, { recursive: true, force: true }));
const file = path.join(dir, 'hooked.yaml');
fs.writeFileSync(file, 'name: hooked\ntriggers:\n  shop: { type: webhook }\nsteps:\n  note: { type: transform, expression: payload }\n');

function cliEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { NO_COLOR: '1' };
  for (const [k, v] of Object.entries(process.env)) if (!/^(TRIBUTARY_|PORT$|DATA_DIR$|RELAY_)/.test(k)) env[k] = v;
  return { ...env, ...extra };
}

it('serve with RELAY_PORT: apply prints the relay listener URL beside the direct one', async () => {
  const fresh = process.env.DATABASE_URL ? await freshPostgresDatabase() : undefined;
  const dataDir = path.join(dir, 'data');
  const env: Record<string, string> = { DATA_DIR: dataDir, PORT: '0', RELAY_PORT: '0', LOG_LEVEL: 'silent' };
  if (fresh) env.DATABASE_URL = fresh.url;
  const running = await serve(loadConfig(env), { http: true, worker: false });
  try {
    assert.ok(running.relay);
    const r = await runCli(['--url', running.url, 'workflow', 'apply', '-f', file], cliEnv({ DATA_DIR: dataDir }));
    assert.equal(r.code, 0, r.stderr);
    const token = /\n {2}(tbwh_\S+)\n/.exec(r.stdout)?.[1];
    assert.ok(token, r.stdout);
    assert.ok(r.stdout.includes(`  deliver to: POST ${running.url}/api/v1/webhooks/${token}\n`), r.stdout);
    assert.ok(r.stdout.includes(`  from a provider, through the relay: POST ${running.relay.url}/hooks/${token}\n`), r.stdout);
    assert.equal((await fetch(`${running.relay.url}/healthz`)).status, 200, 'the relay answers there');
  } finally {
    await running.stop();
    await fresh?.drop();
  }
});

it('RELAY_PUBLIC_URL: the save answer names it, and apply --json gives each new token its relay URL', async () => {
  const t = await startApp({ RELAY_PUBLIC_URL: 'https://hooks.example.com/' });
  try {
    const tenant = await seedTenant(t.deps);
    const r = await runCli(
      ['--json', '--url', t.url, 'workflow', 'apply', '-f', file],
      cliEnv({ TRIBUTARY_CLIENT_ID: tenant.clientId, TRIBUTARY_CLIENT_SECRET: tenant.clientSecret }),
    );
    assert.equal(r.code, 0, r.stderr + r.stdout);
    const doc = JSON.parse(r.stdout);
    const token = doc.meta.trigger_tokens.shop;
    assert.match(token, /^tbwh_/);
    assert.deepEqual(doc.meta.relay_urls, { shop: `https://hooks.example.com/hooks/${token}` });
    // Applied again, nothing is new: no token, no URL.
    const again = await runCli(
      ['--url', t.url, 'workflow', 'apply', '-f', file],
      cliEnv({ TRIBUTARY_CLIENT_ID: tenant.clientId, TRIBUTARY_CLIENT_SECRET: tenant.clientSecret }),
    );
    assert.equal(again.code, 0, again.stderr);
    assert.doesNotMatch(again.stdout, /hooks\.example\.com|tbwh_/);
  } finally {
    await t.close();
  }
});

it('no relay known: apply prints the direct URL only', async () => {
  const t = await startApp();
  try {
    const tenant = await seedTenant(t.deps);
    const r = await runCli(
      ['--url', t.url, 'workflow', 'apply', '-f', file],
      cliEnv({ TRIBUTARY_CLIENT_ID: tenant.clientId, TRIBUTARY_CLIENT_SECRET: tenant.clientSecret }),
    );
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /deliver to: POST /);
    assert.doesNotMatch(r.stdout, /relay/);
  } finally {
    await t.close();
  }
});
