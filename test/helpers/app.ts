/**
 * Test harness: a real app on a real database, listening on a loopback socket.
 * Each test file gets a fresh database: an in-memory PGlite, or, when DATABASE_URL is set,
 * a new PostgreSQL database created for the file and dropped afterwards.
 */
import { listenMetrics } from '../../src/http/metrics-listener.ts';
import { after } from 'node:test';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import pino from 'pino';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { loadConfig, type Config } from '../../src/config.ts';
import { buildApp } from '../../src/app.ts';
import { closeDeps, createDeps, type Deps } from '../../src/deps.ts';
import * as admin from '../../src/admin/service.ts';
import type { Role } from '../../src/db/tables.ts';
import type { Scope } from '../../src/auth/tokens.ts';
import { freshPostgres, pgliteTemplate } from './databases.ts';
import { startWorker, type Worker } from '../../src/worker/worker.ts';

export const ENGINE = process.env.DATABASE_URL ? 'postgres' : 'pglite';

/** A migrated copy on the server of DATABASE_URL (empty with `{empty: true}`); returns its URL and a drop function. */
export async function freshPostgresDatabase(opts: { empty?: boolean } = {}): Promise<{ url: string; drop: () => Promise<void> }> {
  return freshPostgres(process.env.DATABASE_URL!, 'tributary_t', opts);
}

export interface TestApp {
  app: FastifyInstance;
  deps: Deps;
  config: Config;
  /** http://127.0.0.1:PORT */
  url: string;
  adminToken: string;
  worker: Worker | undefined;
  /** The metrics' listener (http://127.0.0.1:PORT), when METRICS_PORT is set. */
  metricsUrl: string | undefined;
  close(): Promise<void>;
}

export interface StartOptions {
  /** The logger of the app (default: one at TEST_LOG_LEVEL). */
  log?: Logger;
  /** Rewrites the URL of the file's fresh PostgreSQL database (e.g. to route it through a proxy). */
  databaseUrl?: (url: string) => string | Promise<string>;
  /** Run the workflow worker in the app's process, as `tributary serve` does. */
  worker?: boolean;
}

export async function startApp(env: Record<string, string> = {}, opts: StartOptions = {}): Promise<TestApp> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tributary-test-'));
  const adminToken = `tbadm_${randomBytes(32).toString('base64url')}`;
  let drop: (() => Promise<void>) | undefined;
  const vars: Record<string, string> = { DATA_DIR: dataDir, TRIBUTARY_ADMIN_TOKEN: adminToken, LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent', PORT: '0' };
  if (process.env.DATABASE_URL) {
    const fresh = await freshPostgresDatabase();
    vars.DATABASE_URL = opts.databaseUrl ? await opts.databaseUrl(fresh.url) : fresh.url;
    drop = fresh.drop;
  }
  if (process.env.REDIS_URL) vars.REDIS_URL = process.env.REDIS_URL;
  const config = loadConfig({ ...vars, ...env });
  const log = opts.log ? { log: opts.log } : {};
  const deps = config.databaseUrl
    ? await createDeps(config, { dataDir, ...log })
    : await createDeps(config, { dataDir: 'memory', initialDump: await pgliteTemplate(), ...log });
  const app = await buildApp(deps);
  const url = await app.listen({ port: 0, host: '127.0.0.1' });
  const metrics = config.metricsPort === undefined ? undefined : await listenMetrics(deps.metrics, config.metricsPort, '127.0.0.1');
  const worker = opts.worker ? startWorker(deps) : undefined;
  return {
    app,
    deps,
    config,
    url,
    adminToken,
    worker,
    metricsUrl: metrics?.url,
    async close() {
      await worker?.stop(1000);
      await app.close();
      await metrics?.close();
      await closeDeps(deps);
      await drop?.();
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** A logger that keeps its lines as parsed objects, to check what was logged. */
export function capturingLogger(lines: Array<Record<string, unknown>>, level = 'info'): Logger {
  const stream = new Writable({
    write(chunk, _enc, cb) {
      for (const line of String(chunk).split('\n')) if (line.trim()) lines.push(JSON.parse(line));
      cb();
    },
  });
  return pino({ level }, stream);
}

export interface Tenant {
  organizationId: string;
  workspaceId: string;
  userId: string;
  membershipId: string;
  credentialId: string;
  clientId: string;
  clientSecret: string;
}

let seq = 0;

/** For a test file: a started app, one tenant and its JSON:API client; the app closes after the file's tests. */
export async function appWithTenant(): Promise<{ t: TestApp; tenant: Tenant; api: ReturnType<typeof jsonApi> }> {
  const t = await startApp();
  after(() => t.close());
  const tenant = await seedTenant(t.deps);
  return { t, tenant, api: jsonApi(t, await tokenFor(t, tenant)) };
}

/** An organization with one workspace, one user of `role` and a service account running as that user. */
export async function seedTenant(deps: Deps, opts: { role?: Role; scopes?: Scope[] } = {}): Promise<Tenant> {
  const n = `${process.pid}-${++seq}-${randomBytes(3).toString('hex')}`;
  const org = await admin.createOrganization(deps.db, { name: `Org ${n}`, domain: `org-${n}.example` });
  const ws = await admin.createWorkspace(deps.db, { organization_id: org.id, name: 'Main' });
  const user = await admin.createUser(deps.db, { email: `user-${n}@example.com` });
  const member = await admin.addMember(deps.db, { organization_id: org.id, user_id: user.id, role: opts.role ?? 'owner' });
  const cred = await admin.createCredential(deps.db, {
    workspace_id: ws.id,
    run_as_membership_id: member.id,
    name: `sa ${n}`,
    scopes: opts.scopes ?? ['api_read', 'api_write', 'webhooks', 'embed'],
  });
  return {
    organizationId: org.id,
    workspaceId: ws.id,
    userId: user.id,
    membershipId: member.id,
    credentialId: cred.id,
    clientId: cred.client_id,
    clientSecret: cred.client_secret,
  };
}

/** Another service account in the same workspace, running as a new user of `role`. */
export async function seedAccount(deps: Deps, tenant: Tenant, opts: { role?: Role; scopes?: Scope[] } = {}): Promise<Tenant> {
  const n = `${process.pid}-${++seq}-${randomBytes(3).toString('hex')}`;
  const user = await admin.createUser(deps.db, { email: `user-${n}@example.com` });
  const member = await admin.addMember(deps.db, { organization_id: tenant.organizationId, user_id: user.id, role: opts.role ?? 'member' });
  const cred = await admin.createCredential(deps.db, {
    workspace_id: tenant.workspaceId,
    run_as_membership_id: member.id,
    name: `sa ${n}`,
    scopes: opts.scopes ?? ['api_read', 'api_write'],
  });
  return { ...tenant, userId: user.id, membershipId: member.id, credentialId: cred.id, clientId: cred.client_id, clientSecret: cred.client_secret };
}

export async function tokenFor(t: TestApp, tenant: Pick<Tenant, 'clientId' | 'clientSecret'>, scope?: string): Promise<string> {
  const body = new URLSearchParams({ grant_type: 'client_credentials', client_id: tenant.clientId, client_secret: tenant.clientSecret });
  if (scope !== undefined) body.set('scope', scope);
  const res = await fetch(`${t.url}/api/v1/oauth/token`, { method: 'POST', body });
  if (res.status !== 200) throw new Error(`token exchange failed: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { access_token: string }).access_token;
}

export const JSONAPI = 'application/vnd.api+json';

export interface ApiResponse {
  status: number;
  headers: Headers;
  body: any;
  text: string;
}

/** A JSON:API client over fetch: real socket, real headers. */
export function jsonApi(t: TestApp, token: string | undefined) {
  const request = async (method: string, p: string, body?: unknown, headers: Record<string, string> = {}): Promise<ApiResponse> => {
    const h: Record<string, string> = { accept: JSONAPI, ...headers };
    if (token !== undefined) h.authorization = `Bearer ${token}`;
    let payload: string | undefined;
    if (body !== undefined) {
      payload = typeof body === 'string' ? body : JSON.stringify(body);
      h['content-type'] ??= JSONAPI;
    }
    const res = await fetch(`${t.url}${p}`, { method, headers: h, body: payload });
    const text = await res.text();
    let parsed: unknown;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = undefined;
    }
    return { status: res.status, headers: res.headers, body: parsed, text };
  };
  return {
    get: (p: string, headers?: Record<string, string>) => request('GET', p, undefined, headers),
    post: (p: string, body: unknown, headers?: Record<string, string>) => request('POST', p, body, headers),
    patch: (p: string, body: unknown, headers?: Record<string, string>) => request('PATCH', p, body, headers),
    request,
  };
}

/** The admin API as the CLI uses it. */
export async function adminCall(t: TestApp, method: string, p: string, body?: unknown): Promise<ApiResponse> {
  const res = await fetch(`${t.url}/admin/v1${p}`, {
    method,
    headers: { authorization: `Bearer ${t.adminToken}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined, text };
}

export function dataModelDoc(attrs: Record<string, unknown>) {
  return { data: { type: 'data_model', attributes: attrs } };
}

/** A JSON:API error document with exactly one error of this status and code (and source, when given). */
export function assertJsonApiError(res: ApiResponse, status: number, code: string, source?: Record<string, string>): void {
  assert.equal(res.status, status, res.text);
  assert.equal(res.headers.get('content-type'), JSONAPI);
  assert.equal(res.body.errors.length, 1, res.text);
  const e = res.body.errors[0];
  assert.equal(e.status, String(status));
  assert.equal(e.code, code);
  if (source !== undefined) assert.deepEqual(e.source, source);
}
