/**
 * First start: serve() on an empty database creates the defaults once, writes
 * bootstrap.json and the admin token (both 0600), and concurrent starts on one
 * PostgreSQL migrate and bootstrap exactly once.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { loadConfig, type Config } from '../../src/config.ts';
import { serve } from '../../src/server.ts';
import { closeDeps, createDeps } from '../../src/deps.ts';
import { bootstrapIfEmpty } from '../../src/admin/bootstrap.ts';
import { capturingLogger, freshPostgresDatabase } from '../helpers/app.ts';

const cleanups: Array<() => Promise<void> | void> = [];
after(async () => {
  for (const c of cleanups.reverse()) await c();
});

async function freshEnv(): Promise<{ dataDir: string; env: Record<string, string> }> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tributary-boot-'));
  cleanups.push(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  const env: Record<string, string> = { DATA_DIR: dataDir, PORT: '0', LOG_LEVEL: 'silent' };
  if (process.env.DATABASE_URL) {
    const fresh = await freshPostgresDatabase({ empty: true });
    cleanups.push(fresh.drop);
    env.DATABASE_URL = fresh.url;
  }
  return { dataDir, env };
}

const mode = (file: string) => fs.statSync(file).mode & 0o777;

test('first start writes bootstrap.json (0600) whose credentials get all four scopes; a restart changes nothing', async () => {
  const { dataDir, env } = await freshEnv();
  const config = loadConfig(env);
  assert.equal(config.adminToken, undefined);
  const bootstrapFile = path.join(dataDir, 'bootstrap.json');
  const tokenFile = path.join(dataDir, 'admin-token');
  assert.equal(fs.existsSync(bootstrapFile), false);

  const first = await serve(config, { http: true, worker: false });
  let boot: Record<string, string>;
  let adminToken: string;
  try {
    assert.equal(mode(bootstrapFile), 0o600);
    boot = JSON.parse(fs.readFileSync(bootstrapFile, 'utf8'));
    assert.deepEqual(Object.keys(boot).sort(), ['client_id', 'client_secret', 'credential_id', 'membership_id', 'organization_id', 'user_id', 'workspace_id']);

    // The generated admin token: 0600, and the one the admin API accepts.
    assert.equal(mode(tokenFile), 0o600);
    adminToken = fs.readFileSync(tokenFile, 'utf8').trim();
    assert.match(adminToken, /^tbadm_.{32,}$/);
    assert.equal(first.deps.adminToken, adminToken);
    const sweep = await fetch(`${first.url}/admin/v1/sweep`, { method: 'POST', headers: { authorization: `Bearer ${adminToken}` } });
    assert.equal(sweep.status, 200);

    const res = await fetch(`${first.url}/api/v1/oauth/token`, {
      method: 'POST',
      body: new URLSearchParams({ grant_type: 'client_credentials', client_id: boot.client_id!, client_secret: boot.client_secret! }),
    });
    assert.equal(res.status, 200);
    const token = (await res.json()) as { access_token: string; scope: string; token_type: string };
    assert.equal(token.token_type, 'bearer');
    assert.deepEqual(token.scope.split(' ').sort(), ['api_read', 'api_write', 'embed', 'webhooks']);

    const orgs = await fetch(`${first.url}/api/json/v1/organizations`, { headers: { authorization: `Bearer ${token.access_token}` } });
    assert.equal(orgs.status, 200);
    const doc = (await orgs.json()) as { data: Array<{ id: string; attributes: { domain: string } }> };
    assert.deepEqual(
      doc.data.map((o) => [o.id, o.attributes.domain]),
      [[boot.organization_id, 'default.tributary.local']],
    );
  } finally {
    await first.stop();
  }

  const before = { boot: fs.readFileSync(bootstrapFile, 'utf8'), mtime: fs.statSync(bootstrapFile).mtimeMs, token: fs.readFileSync(tokenFile, 'utf8') };
  const second = await serve(loadConfig(env), { http: true, worker: false });
  try {
    const orgs = await second.deps.db.selectFrom('organizations').select(['id', 'domain']).execute();
    assert.deepEqual(orgs, [{ id: boot.organization_id, domain: 'default.tributary.local' }]);
    const accounts = await second.deps.db.selectFrom('service_accounts').select('id').execute();
    assert.deepEqual(accounts, [{ id: boot.credential_id }]);
    assert.equal(fs.readFileSync(bootstrapFile, 'utf8'), before.boot);
    assert.equal(fs.statSync(bootstrapFile).mtimeMs, before.mtime);
    assert.equal(mode(bootstrapFile), 0o600);
    assert.equal(fs.readFileSync(tokenFile, 'utf8'), before.token);
    assert.equal(second.deps.adminToken, adminToken);
  } finally {
    await second.stop();
  }
});

test('concurrent starts on one fresh PostgreSQL migrate once and bootstrap once', async (t) => {
  if (!process.env.DATABASE_URL) {
    t.skip('PostgreSQL only (DATABASE_URL is not set)');
    return;
  }
  const { dataDir, env } = await freshEnv();
  const config: Config = loadConfig(env);
  const lines: Array<Record<string, unknown>> = [];
  const [a, b] = await Promise.all([createDeps(config, { log: capturingLogger(lines) }), createDeps(config, { log: capturingLogger(lines) })]);
  try {
    const expected = fs
      .readdirSync(path.resolve(import.meta.dirname, '../../src/db/migrations'))
      .filter((f) => /^\d{4}_.*\.ts$/.test(f))
      .map((f) => f.replace(/\.ts$/, ''))
      .sort();
    assert.ok(expected.length >= 1);
    const rows = await sql<{ name: string }>`select name from schema_migrations order by name`.execute(a.db);
    assert.deepEqual(
      rows.rows.map((r) => r.name),
      expected,
    );
    // Exactly one of the two applied the migrations.
    const applied = lines.filter((l) => l.msg === 'migrations applied');
    assert.equal(applied.length, 1);
    assert.deepEqual(applied[0]!.migrations, expected);
    // Both processes sign with the same key, and share one admin token.
    assert.equal(a.signingKey.equals(b.signingKey), true);
    assert.equal(a.adminToken, b.adminToken);

    const results = await Promise.all([bootstrapIfEmpty(a), bootstrapIfEmpty(b)]);
    const created = results.filter((r) => r !== undefined);
    assert.equal(created.length, 1);
    assert.equal(results.filter((r) => r === undefined).length, 1);
    const orgs = await a.db.selectFrom('organizations').select(['id', 'domain']).execute();
    assert.deepEqual(orgs, [{ id: created[0]!.organization_id, domain: 'default.tributary.local' }]);
    const accounts = await a.db.selectFrom('service_accounts').select('client_id').execute();
    assert.deepEqual(accounts, [{ client_id: created[0]!.client_id }]);
    const boot = JSON.parse(fs.readFileSync(path.join(dataDir, 'bootstrap.json'), 'utf8'));
    assert.equal(boot.client_id, created[0]!.client_id);
    assert.equal(boot.client_secret, created[0]!.client_secret);
  } finally {
    await closeDeps(a);
    await closeDeps(b);
  }
});
