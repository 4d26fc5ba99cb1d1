/**
 * Deduplication: concurrent identical deliveries make exactly one run (the guard's unique
 * key decides, not a read before the write), and the delivery identity rules as properties.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { BODY_BUCKET_MS, DELIVERY_ID_HEADERS, deliveryHeader, deliveryIdentity } from '../../src/triggers/identity.ts';
import { runs } from '../helpers/property.ts';
import { API, deliver, saveOk, startFlow } from '../webhooks/helpers.ts';

describe('concurrent identical deliveries', () => {
  it('50 at once for each of 100 identities: exactly one run each', async () => {
    const f = await startFlow({ WEBHOOK_RATE_LIMIT_MAX: '1000000', MAX_CONNECTIONS_PER_ADDRESS: '0' }, { worker: false });
    const { tokens } = await saveOk(f, { step_params: [] });
    const path = `/api/v1/webhooks/${tokens.hook}`;
    const accepted = new Map<string, string[]>();
    const identities = Array.from({ length: 100 }, (_, i) => `delivery-${i}`);
    // Four identities at a time, each with its 50 copies in flight together.
    for (let i = 0; i < identities.length; i += 4) {
      await Promise.all(
        identities.slice(i, i + 4).map(async (key) => {
          const answers = await Promise.all(Array.from({ length: 50 }, () => deliver(f, path, JSON.stringify({ key }), { 'idempotency-key': key })));
          for (const a of answers) assert.equal(a.status, 202, a.text);
          accepted.set(
            key,
            answers.filter((a) => a.body.status === 'accepted').map((a) => a.body.workflow_run_id),
          );
          assert.equal(answers.filter((a) => a.body.status === 'duplicate').length, 49);
        }),
      );
    }
    for (const [key, ids] of accepted) assert.equal(ids.length, 1, `${key}: ${ids.length} accepted`);
    const count = await f.t.deps.db
      .selectFrom('workflow_runs')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .executeTakeFirstOrThrow();
    assert.equal(Number(count.n), 100);
    const guards = await f.t.deps.db.selectFrom('delivery_guards').select('run_id').execute();
    assert.deepEqual(new Set(guards.map((g) => g.run_id)), new Set([...accepted.values()].flat()));
  });
});

describe('delivery identities from different headers', () => {
  it("the same value in two senders' headers is two deliveries; in one header, one per organization", async () => {
    const f = await startFlow({}, { worker: false });
    const alpha = `/api/v1/webhooks/${(await saveOk(f, { wf_params: { name: 'Alpha', is_active: true }, step_params: [] })).tokens.hook}`;
    const beta = `/api/v1/webhooks/${(await saveOk(f, { wf_params: { name: 'Beta', is_active: true }, step_params: [] })).tokens.hook}`;
    const a = await deliver(f, alpha, '{"from":"alpha"}', { 'x-alpha-delivery': '79269' });
    assert.equal(a.body.status, 'accepted', a.text);
    const b = await deliver(f, beta, '{"from":"beta"}', { 'x-beta-webhook-id': '79269' });
    assert.equal(b.body.status, 'accepted', b.text);
    const g = await deliver(f, beta, '{"from":"gamma"}', { 'x-gamma-idempotency-token': '79269' });
    assert.equal(g.body.status, 'accepted', g.text);
    // The scope stays the organization: the same header and value to another of its workflows is a duplicate.
    assert.deepEqual((await deliver(f, beta, '{"from":"alpha again"}', { 'x-alpha-delivery': '79269' })).body, { status: 'duplicate' });
    // Idempotency-Key has its own key, as before, and the header order still holds.
    assert.equal((await deliver(f, alpha, '{}', { 'idempotency-key': '79269' })).body.status, 'accepted');
    assert.deepEqual((await deliver(f, beta, '{}', { 'idempotency-key': '79269', 'x-beta-webhook-id': 'other' })).body, { status: 'duplicate' });
    // The run shows the value alone as its delivery_id.
    for (const d of [a, b, g]) {
      const run = await f.api.get(`${API}/workflow_runs/${d.body.workflow_run_id}`);
      assert.equal(run.body.data.attributes.delivery_id, '79269', run.text);
    }
  });
});

describe('delivery identity (property)', () => {
  const headerValue = fc.oneof(fc.constant(''), fc.constant('   '), fc.string({ minLength: 1, maxLength: 20 }));
  const headerSets = fc.record(
    Object.fromEntries([...DELIVERY_ID_HEADERS, 'x-request-id'].map((h) => [h, fc.option(headerValue, { nil: undefined })])) as Record<
      string,
      fc.Arbitrary<string | undefined>
    >,
  );

  it('the first non-empty of the four headers wins; X-Request-Id never counts', () => {
    fc.assert(
      fc.property(headerSets, (headers) => {
        const clean = Object.fromEntries(Object.entries(headers).filter(([, v]) => v !== undefined)) as Record<string, string>;
        const name = DELIVERY_ID_HEADERS.find((h) => clean[h] !== undefined && clean[h].trim() !== '');
        const expected = name === undefined ? undefined : clean[name]!.trim();
        assert.equal(deliveryHeader(clean)?.value, expected);
        const id = deliveryIdentity(clean, 'hash', Buffer.from('{}'), 0);
        if (expected !== undefined) {
          assert.equal(id.deliveryId, expected);
          // Keyed by the header as well as its value; Idempotency-Key keeps its original key.
          const digest = createHash('sha256').update(expected).digest('hex');
          assert.equal(id.key, name === 'idempotency-key' ? `h:${digest}` : `h:${name}:${digest}`);
        } else {
          assert.match(id.key, /^b:[0-9a-f]{64}$/);
        }
      }),
      { numRuns: runs(300) },
    );
  });

  it('without a header: equal bodies in one two-hour bucket share a key; another body, bucket or trigger does not', () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ maxLength: 64 }),
        fc.uint8Array({ maxLength: 64 }),
        fc.integer({ min: 0, max: 2 ** 40 }),
        fc.integer({ min: 0, max: BODY_BUCKET_MS * 3 }),
        (a, b, t, dt) => {
          const bodyA = Buffer.from(a);
          const bodyB = Buffer.from(b);
          const k = (body: Buffer, at: number, trigger = 'trigger-1') => deliveryIdentity({}, trigger, body, at).key;
          const sameBucket = Math.floor(t / BODY_BUCKET_MS) === Math.floor((t + dt) / BODY_BUCKET_MS);
          assert.equal(k(bodyA, t) === k(bodyA, t + dt), sameBucket);
          assert.equal(k(bodyA, t) === k(bodyB, t), bodyA.equals(bodyB));
          assert.notEqual(k(bodyA, t), k(bodyA, t, 'trigger-2'));
        },
      ),
      { numRuns: runs(300) },
    );
  });
});
