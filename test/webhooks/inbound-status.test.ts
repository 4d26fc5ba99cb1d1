/**
 * An inbound connector's status follows its deliveries (connectors/inbound-status.ts): a
 * delivery GitHub's own code signed makes it verified; FAILING_AFTER bad ones in a row make
 * it failing, with last_error naming the check and the header and the time, never the
 * secret or the signature; a good one after that makes it verified again. Verify on it is
 * 422. A flood of bad signatures changes the row once, with a bounded number of statements.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import { sign as githubSign } from '@octokit/webhooks-methods';
import { sql } from 'kysely';
import { FAILING_AFTER, inboundStatus } from '../../src/connectors/inbound-status.ts';
import { INBOUND_VERIFY_TEXT } from '../../src/connectors/verify.ts';
import { assertJsonApiError } from '../helpers/app.ts';
import { API, deliver, saveOk, startFlow, type Flow } from './helpers.ts';

const f: Flow = await startFlow({ WEBHOOK_RATE_LIMIT_MAX: '100000' }, { worker: false });
const STEPS = [{ key: 'note', type: 'transform', config: { expression: 'payload' } }];

async function inbound(attributes: Record<string, unknown>): Promise<{ id: string; path: string }> {
  const c = await f.api.post(`${API}/external_connectors`, {
    data: { type: 'external_connector', attributes: { name: `inbound-${randomBytes(3).toString('hex')}`, type: 'http', direction: 'inbound', ...attributes } },
  });
  assert.equal(c.status, 201, c.text);
  const { tokens } = await saveOk(f, {
    wf_params: { name: `Hook ${c.body.data.id}`, is_active: true },
    step_params: STEPS,
    trigger_params: [{ key: 'hook', type: 'webhook', service_account_id: f.tenant.credentialId, inbound_connector_id: c.body.data.id }],
  });
  return { id: c.body.data.id, path: `/api/v1/webhooks/${tokens.hook}` };
}

const SECRET = randomBytes(20).toString('hex');
const github = await inbound({ auth_type: 'hmac', secret: SECRET, config: { signature_scheme: 'github' } });

/** Waits until the process has taken `n` more deliveries into account and written what they asked for. */
async function settle(before: number, n: number) {
  const s = f.t.deps.inboundStatus;
  const deadline = Date.now() + 10_000;
  while (s.counts.observed < before + n) {
    if (Date.now() > deadline) assert.fail(`observed ${s.counts.observed - before} of ${n} deliveries`);
    await new Promise((r) => setTimeout(r, 5));
  }
  await s.settled();
}

async function send(path: string, good: boolean, extra: Record<string, string> = {}) {
  const body = JSON.stringify({ action: 'opened', n: randomBytes(4).toString('hex') });
  const signature = await githubSign(good ? SECRET : 'not-the-secret-at-all', body);
  return deliver(f, path, body, { 'x-github-delivery': crypto.randomUUID(), 'x-hub-signature-256': signature, ...extra });
}

async function connector(id: string) {
  const r = await f.api.get(`${API}/external_connectors/${id}`);
  assert.equal(r.status, 200, r.text);
  return r.body.data.attributes;
}

describe('inbound connector status from deliveries', () => {
  it('starts unverified; a GitHub-signed delivery makes it verified, with the time', async () => {
    assert.equal((await connector(github.id)).status, 'unverified');
    const before = f.t.deps.inboundStatus.counts.observed;
    const d = await send(github.path, true);
    assert.equal(d.status, 202, d.text);
    await settle(before, 1);
    const a = await connector(github.id);
    assert.equal(a.status, 'verified');
    assert.equal(a.last_error, null);
    assert.ok(a.last_verified_at !== null && Math.abs(Date.parse(a.last_verified_at) - Date.now()) < 60_000, a.last_verified_at);
  });

  it(`fails after ${FAILING_AFTER} bad signatures in a row, saying what and when, never the secret or signature; a good one verifies it again`, async () => {
    let before = f.t.deps.inboundStatus.counts.observed;
    const signatures: string[] = [];
    for (let i = 0; i < FAILING_AFTER - 1; i++) {
      const d = await send(github.path, false);
      assert.equal(d.status, 401, d.text);
    }
    await settle(before, FAILING_AFTER - 1);
    assert.equal((await connector(github.id)).status, 'verified', 'fewer than FAILING_AFTER failures leave it verified');
    before = f.t.deps.inboundStatus.counts.observed;
    const body = '{"action":"closed"}';
    const bad = await githubSign('not-the-secret-at-all', body);
    signatures.push(bad.slice('sha256='.length));
    const d = await deliver(f, github.path, body, { 'x-hub-signature-256': bad });
    assert.equal(d.status, 401, d.text);
    await settle(before, 1);
    const a = await connector(github.id);
    assert.equal(a.status, 'failing');
    assert.match(a.last_error, /^signature mismatch \(X-Hub-Signature-256\) at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    assert.ok(Math.abs(Date.parse(a.last_error.slice(-20)) - Date.now()) < 60_000, a.last_error);
    assert.ok(!a.last_error.includes(SECRET) && !signatures.some((s) => a.last_error.includes(s)));
    const verifiedAt = a.last_verified_at;

    before = f.t.deps.inboundStatus.counts.observed;
    assert.equal((await send(github.path, true)).status, 202);
    await settle(before, 1);
    const again = await connector(github.id);
    assert.equal(again.status, 'verified');
    assert.equal(again.last_error, null);
    assert.ok(Date.parse(again.last_verified_at) >= Date.parse(verifiedAt));
  });

  it('a missing signature header says so', async () => {
    const before = f.t.deps.inboundStatus.counts.observed;
    for (let i = 0; i < FAILING_AFTER; i++) assert.equal((await deliver(f, github.path, '{"a":1}')).status, 401);
    await settle(before, FAILING_AFTER);
    assert.match((await connector(github.id)).last_error, /^missing signature headers \(X-Hub-Signature-256\) at /);
    const after = f.t.deps.inboundStatus.counts.observed;
    assert.equal((await send(github.path, true)).status, 202);
    await settle(after, 1);
    assert.equal((await connector(github.id)).status, 'verified');
  });

  it("sees a status another process wrote, through this process's cached admission", async () => {
    let before = f.t.deps.inboundStatus.counts.observed;
    // Accepted: the admission is cached with the status it read (verified).
    assert.equal((await send(github.path, true)).status, 202);
    await settle(before, 1);
    assert.equal((await connector(github.id)).status, 'verified');
    // Another process's deliveries failed meanwhile.
    await sql`update external_connectors set status = 'failing', last_error = 'signature mismatch (X-Hub-Signature-256) at 2026-12-02T05:01:02Z' where id = ${github.id}`.execute(
      f.t.deps.db,
    );
    before = f.t.deps.inboundStatus.counts.observed;
    assert.equal((await send(github.path, true)).status, 202);
    await settle(before, 1);
    const a = await connector(github.id);
    assert.equal(a.status, 'verified', 'the cached admission read verified; the accepting statement saw the change');
    assert.equal(a.last_error, null);
  });

  it('an inbound api_key connector fails on a wrong key, naming its header', async () => {
    const key = `key_${randomBytes(16).toString('hex')}`;
    const c = await inbound({ auth_type: 'api_key', secret: key, config: { header_name: 'X-Hook-Key' } });
    let before = f.t.deps.inboundStatus.counts.observed;
    assert.equal((await deliver(f, c.path, '{"a":1}', { 'x-hook-key': key })).status, 202);
    await settle(before, 1);
    assert.equal((await connector(c.id)).status, 'verified');
    before = f.t.deps.inboundStatus.counts.observed;
    for (let i = 0; i < FAILING_AFTER; i++) assert.equal((await deliver(f, c.path, '{"a":1}', { 'x-hook-key': `${key}x` })).status, 401);
    await settle(before, FAILING_AFTER);
    const a = await connector(c.id);
    assert.equal(a.status, 'failing');
    assert.match(a.last_error, /^key mismatch \(X-Hook-Key\) at /);
    assert.ok(!a.last_error.includes(key));
  });

  it('verify on an inbound connector is 422, saying its deliveries verify it; its status is untouched', async () => {
    const r = await f.api.post(`${API}/external_connectors/${github.id}/verify`, undefined);
    assertJsonApiError(r, 422, 'invalid_request');
    assert.equal(r.body.errors[0].detail, INBOUND_VERIFY_TEXT);
    assert.equal((await connector(github.id)).status, 'verified');
  });

  it('lists show the direction and filter by it', async () => {
    const r = await f.api.get(`${API}/external_connectors?filter[direction]=inbound&fields[external_connector]=name,direction,status`);
    assert.equal(r.status, 200, r.text);
    assert.ok(r.body.data.length >= 2);
    for (const c of r.body.data) assert.equal(c.attributes.direction, 'inbound');
  });

  it('a flood of bad signatures changes the row once, with at most two statements', async () => {
    const s = f.t.deps.inboundStatus;
    const start = { ...s.counts };
    const xmin = async () =>
      (await sql<{ x: string }>`select xmin::text as x from external_connectors where id = ${github.id}`.execute(f.t.deps.db)).rows[0]!.x;
    const FLOOD = 60;
    for (let i = 0; i < FLOOD; i++) assert.equal((await send(github.path, false)).status, 401);
    await settle(start.observed, FLOOD);
    const x = await xmin();
    assert.equal((await connector(github.id)).status, 'failing');
    assert.equal(s.counts.changed - start.changed, 1, 'one change of state');
    // The first change, and at most one more sent by a delivery whose lookup was read before it committed.
    assert.ok(s.counts.statements - start.statements <= 2, `${s.counts.statements - start.statements} statements`);
    // Once failing, more bad signatures ask for nothing.
    const mid = s.counts.statements;
    for (let i = 0; i < 20; i++) await send(github.path, false);
    await settle(start.observed, FLOOD + 20);
    assert.ok(s.counts.statements - mid <= 1);
    assert.equal(await xmin(), x, 'the row was not written again');
    const before = s.counts.observed;
    assert.equal((await send(github.path, true)).status, 202);
    await settle(before, 1);
  });

  it('good and bad deliveries interleaved: at most one statement per connector per interval', async () => {
    const original = f.t.deps.inboundStatus;
    // An hour's interval: every change after the first waits, replaced by the latest one.
    const slow = inboundStatus(f.t.deps.db, f.t.deps.clock, f.t.deps.log, { intervalMs: 3_600_000 });
    f.t.deps.inboundStatus = slow;
    try {
      let n = 0;
      for (let round = 0; round < 6; round++) {
        assert.equal((await send(github.path, true)).status, 202);
        for (let i = 0; i < FAILING_AFTER; i++) assert.equal((await send(github.path, false)).status, 401);
        n += 1 + FAILING_AFTER;
      }
      const deadline = Date.now() + 10_000;
      while (slow.counts.observed < n && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
      // The changes still waiting are dropped; the statement sent is waited for.
      slow.close();
      await slow.settled();
      assert.equal(slow.counts.observed, n);
      assert.equal(slow.counts.statements, 1, 'the first change only; the others wait for the interval');
    } finally {
      slow.close();
      f.t.deps.inboundStatus = original;
    }
  });
});
