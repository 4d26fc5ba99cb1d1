/**
 * Revocation under load: a process keeps admissions of deliveries (surface.ts), and the
 * accepting statement refuses any whose lookup row changed (webhooks.sql.ts). For each kind
 * of revocation the lookup covers, deliveries flow from real sockets (fetch, kept-alive
 * connections) while the revocation is made through another connection; no delivery sent
 * after the revocation's answer returned is accepted or leaves a run row, and each is
 * refused with the answer a fresh lookup gives. On PostgreSQL the same again with two app
 * instances on one database (each its own pool and cache): revoked through one, delivered
 * to the other.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import * as admin from '../../src/admin/service.ts';
import { ENGINE, jsonApi, seedAccount, startApp, tokenFor, type Tenant, type TestApp } from '../helpers/app.ts';
import { API, saveOk, startFlow, type Flow } from './helpers.ts';

const f: Flow = await startFlow({ WEBHOOK_RATE_LIMIT_MAX: '100000' }, { worker: false });
const STEPS = [{ key: 'note', type: 'transform', config: { expression: 'payload' } }];

/** Concurrent senders, and how many answers each phase waits for. */
const SENDERS = 6;
const BEFORE = 24;
const AFTER = 24;

interface Sent {
  key: string;
  /** performance.now() when the request was started. */
  at: number;
  status: number;
  body: any;
}

interface Hook {
  path: string;
  workflowId: string;
  trigger: unknown;
  bearer: string;
  account: Tenant;
  connectorId: string | null;
}

async function connector(key: string): Promise<string> {
  const r = await f.api.post(`${API}/external_connectors`, {
    data: { type: 'external_connector', attributes: { name: `in ${randomBytes(3).toString('hex')}`, auth_type: 'api_key', direction: 'inbound', secret: key } },
  });
  assert.equal(r.status, 201, r.text);
  return r.body.data.id;
}

/** A new workflow whose webhook trigger selects `account` (a new one with scope webhooks by default). */
async function hook(opts: { account?: Tenant; connectorId?: string | null } = {}): Promise<Hook> {
  const account = opts.account ?? (await seedAccount(f.t.deps, f.tenant, { scopes: ['webhooks', 'api_read'] }));
  const connectorId = opts.connectorId ?? null;
  const { tokens, workflow } = await saveOk(f, {
    step_params: STEPS,
    trigger_params: [{ key: 'hook', type: 'webhook', service_account_id: account.credentialId, inbound_connector_id: connectorId }],
  });
  const wf = await f.api.get(`${API}/workflows/${workflow.id}`);
  return {
    path: `/api/v1/webhooks/${tokens.hook}`,
    workflowId: workflow.id,
    trigger: wf.body.data.attributes.triggers[0],
    bearer: await tokenFor(f.t, account, 'webhooks'),
    account,
    connectorId,
  };
}

/**
 * Deliveries to `url` + the hook's path from SENDERS loops until `stop` resolves; every
 * answer recorded with when its request was started.
 */
function load(url: string, h: Hook, headers: Record<string, string>, prefix: string) {
  const sent: Sent[] = [];
  let stopped = false;
  let n = 0;
  const loops = Array.from({ length: SENDERS }, async () => {
    while (!stopped) {
      const key = `${prefix}-${n++}`;
      const at = performance.now();
      const res = await fetch(`${url}${h.path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${h.bearer}`, 'content-type': 'application/json', 'idempotency-key': key, ...headers },
        body: JSON.stringify({ payload: { key } }),
      });
      const text = await res.text();
      sent.push({ key, at, status: res.status, body: JSON.parse(text) });
    }
  });
  return {
    sent,
    async until(done: () => boolean) {
      const deadline = Date.now() + 60_000;
      while (!done()) {
        if (Date.now() > deadline) assert.fail(`the load stalled: ${sent.length} answers`);
        await new Promise((r) => setTimeout(r, 5));
      }
    },
    async stop() {
      stopped = true;
      await Promise.all(loops);
    },
  };
}

interface Kind {
  name: string;
  /** Builds the hook (and what the revocation needs); the bearer and headers the deliveries carry. */
  setup(): Promise<{ h: Hook; headers?: Record<string, string> }>;
  /** Makes the revocation through `via` (another connection than the deliveries'); resolves when it answered. */
  revoke(h: Hook, via: TestApp): Promise<void>;
  expect: { status: number; error: string };
}

const API_KEY = randomBytes(24).toString('base64url');

async function saveAs(h: Hook, via: TestApp, attrs: { wf_params?: unknown; trigger_params: unknown[] }) {
  const api = jsonApi(via, f.bearer);
  const r = await api.post(`${API}/workflows/save_builder_state`, {
    data: {
      type: 'workflow_builder_state',
      attributes: {
        is_new_version: false,
        organization_id: f.tenant.organizationId,
        workflow_id: h.workflowId,
        wf_params: { name: 'Orders', is_active: true },
        step_params: STEPS,
        ...attrs,
      },
    },
  });
  assert.equal(r.status, 201, r.text);
}

const KINDS: Kind[] = [
  {
    name: 'the service account deactivated',
    setup: async () => ({ h: await hook() }),
    revoke: async (h, via) => void (await admin.updateCredential(via.deps.db, h.account.credentialId, { is_active: false }, new Date())),
    expect: { status: 401, error: 'missing_credentials' },
  },
  {
    name: "the account's tokens revoked",
    setup: async () => ({ h: await hook() }),
    revoke: async (h, via) => void (await admin.updateCredential(via.deps.db, h.account.credentialId, { revoke_tokens: true }, new Date())),
    expect: { status: 401, error: 'missing_credentials' },
  },
  {
    name: 'the account moved to another workspace',
    setup: async () => ({ h: await hook() }),
    revoke: async (h, via) => {
      const ws = await admin.createWorkspace(via.deps.db, { organization_id: f.tenant.organizationId, name: `other ${randomBytes(3).toString('hex')}` });
      await admin.updateCredential(via.deps.db, h.account.credentialId, { workspace_id: ws.id }, new Date());
    },
    expect: { status: 401, error: 'missing_credentials' },
  },
  {
    name: 'the scope webhooks removed from the account',
    setup: async () => ({ h: await hook() }),
    revoke: async (h, via) => void (await admin.updateCredential(via.deps.db, h.account.credentialId, { scopes: ['api_read'] }, new Date())),
    expect: { status: 403, error: 'Insufficient scope' },
  },
  {
    name: 'the run-as membership deactivated',
    setup: async () => ({ h: await hook() }),
    revoke: async (h, via) => void (await admin.deactivateMember(via.deps.db, h.account.membershipId, new Date())),
    expect: { status: 401, error: 'Unauthorized' },
  },
  {
    name: 'the workflow deactivated',
    setup: async () => ({ h: await hook() }),
    revoke: (h, via) => saveAs(h, via, { wf_params: { name: 'Orders', is_active: false }, trigger_params: [h.trigger] }),
    expect: { status: 404, error: 'Trigger not found' },
  },
  {
    name: 'the trigger left out of a save (its token deleted)',
    setup: async () => ({ h: await hook() }),
    revoke: (h, via) => saveAs(h, via, { trigger_params: [] }),
    expect: { status: 404, error: 'Trigger not found' },
  },
  {
    name: 'the trigger given to another service account',
    setup: async () => ({ h: await hook() }),
    revoke: async (h, via) => {
      const other = await seedAccount(via.deps, f.tenant, { scopes: ['webhooks'] });
      await saveAs(h, via, { trigger_params: [{ ...(h.trigger as object), service_account_id: other.credentialId }] });
    },
    expect: { status: 401, error: 'Unauthorized' },
  },
  {
    name: "the inbound connector's secret changed",
    setup: async () => ({ h: await hook({ connectorId: await connector(API_KEY) }), headers: { 'x-api-key': API_KEY } }),
    revoke: async (h, via) => {
      const r = await jsonApi(via, f.bearer).patch(`${API}/external_connectors/${h.connectorId}`, {
        data: { type: 'external_connector', id: h.connectorId, attributes: { secret: randomBytes(24).toString('base64url') } },
      });
      assert.ok(r.status < 300, r.text);
    },
    expect: { status: 401, error: 'Unauthorized' },
  },
];

async function runsOf(workflowId: string): Promise<Set<string>> {
  const { rows } = await sql<{ delivery_id: string }>`select delivery_id from workflow_runs where workflow_id = ${workflowId}`.execute(f.t.deps.db);
  return new Set(rows.map((r) => r.delivery_id));
}

/** Deliveries to `target` while `kind` is revoked through `via`: none sent after the revocation answered is accepted. */
async function revokeDuringLoad(kind: Kind, target: TestApp, via: TestApp): Promise<void> {
  const { h, headers = {} } = await kind.setup();
  const prefix = `rv-${randomBytes(4).toString('hex')}`;
  const l = load(target.url, h, headers, prefix);
  let revokedAt = Infinity;
  try {
    // Flowing, and admitted from the target's cache (the first delivery put it there).
    await l.until(() => l.sent.filter((s) => s.status === 202).length >= BEFORE);
    await kind.revoke(h, via);
    revokedAt = performance.now();
    await l.until(() => l.sent.filter((s) => s.at > revokedAt).length >= AFTER);
  } finally {
    await l.stop();
  }
  const before = l.sent.filter((s) => s.at < revokedAt);
  const later = l.sent.filter((s) => s.at > revokedAt);
  assert.ok(
    before.every((s) => s.status === 202 || s.status === kind.expect.status),
    JSON.stringify(before.filter((s) => s.status !== 202)),
  );
  for (const s of later) {
    assert.equal(s.status, kind.expect.status, `${s.key} sent after the revocation answered: ${JSON.stringify(s.body)}`);
    assert.equal(s.body.error, kind.expect.error, JSON.stringify(s.body));
  }
  const runs = await runsOf(h.workflowId);
  for (const s of later) assert.ok(!runs.has(s.key), `${s.key} sent after the revocation answered has a run`);
  // Every accepted delivery made its run (the figures above are not vacuous).
  for (const s of l.sent.filter((x) => x.status === 202)) assert.ok(runs.has(s.key), `${s.key} answered 202 without a run`);
}

describe('revocation during a load: nothing sent after the answer is accepted', () => {
  for (const kind of KINDS) it(kind.name, () => revokeDuringLoad(kind, f.t, f.t));
});

describe(
  'two app instances on one database: revoked through one, the other refuses at once',
  { skip: ENGINE !== 'postgres' && 'PostgreSQL only (PGlite is one process)' },
  async () => {
    // Its own pool and its own admissions, on the first app's database.
    let other: TestApp;
    before(async () => {
      const url = f.t.config.databaseUrl!;
      other = await startApp({ WEBHOOK_RATE_LIMIT_MAX: '100000' }, { databaseUrl: () => url });
    });
    after(() => other.close());
    for (const kind of KINDS) it(kind.name, async () => revokeDuringLoad(kind, other, f.t));
  },
);
