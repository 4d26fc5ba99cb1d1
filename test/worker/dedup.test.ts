/**
 * Deduplication: concurrent identical deliveries make exactly one run (the guard's unique
 * key decides, not a read before the write), and the delivery identity rules as properties.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { BODY_BUCKET_MS, DELIVERY_ID_HEADERS, deliveryHeader, deliveryIdentity } from '../../src/webhooks/identity.ts';
import { runs } from '../helpers/property.ts';
import { deliver, saveOk, startFlow } from '../webhooks/helpers.ts';

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
          accepted.set(key, answers.filter((a) => a.body.status === 'accepted').map((a) => a.body.workflow_run_id));
          assert.equal(answers.filter((a) => a.body.status === 'duplicate').length, 49);
        }),
      );
    }
    for (const [key, ids] of accepted) assert.equal(ids.length, 1, `${key}: ${ids.length} accepted`);
    const count = await f.t.deps.db.selectFrom('workflow_runs').select((eb) => eb.fn.countAll<string>().as('n')).executeTakeFirstOrThrow();
    assert.equal(Number(count.n), 100);
    const guards = await f.t.deps.db.selectFrom('delivery_guards').select('run_id').execute();
    assert.deepEqual(new Set(guards.map((g) => g.run_id)), new Set([...accepted.values()].flat()));
  });
});

describe('delivery identity (property)', () => {
  const headerValue = fc.oneof(fc.constant(''), fc.constant('   '), fc.string({ minLength: 1, maxLength: 20 }));
  const headerSets = fc.record(Object.fromEntries([...DELIVERY_ID_HEADERS, 'x-request-id'].map((h) => [h, fc.option(headerValue, { nil: undefined })])) as Record<string, fc.Arbitrary<string | undefined>>);

  it('the first non-empty of the four headers wins; X-Request-Id never counts', () => {
    fc.assert(
      fc.property(headerSets, (headers) => {
        const clean = Object.fromEntries(Object.entries(headers).filter(([, v]) => v !== undefined)) as Record<string, string>;
        const expected = DELIVERY_ID_HEADERS.map((h) => clean[h]?.trim()).find((v) => v !== undefined && v !== '');
        assert.equal(deliveryHeader(clean), expected);
        const id = deliveryIdentity(clean, 'hash', Buffer.from('{}'), 0);
        if (expected !== undefined) {
          assert.equal(id.deliveryId, expected);
          assert.equal(id.key, `h:${createHash('sha256').update(expected).digest('hex')}`);
        } else {
          assert.match(id.key, /^b:[0-9a-f]{64}$/);
        }
      }),
      { numRuns: runs(300) },
    );
  });

  it('without a header: equal bodies in one two-hour bucket share a key; another body, bucket or trigger does not', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), fc.uint8Array({ maxLength: 64 }), fc.integer({ min: 0, max: 2 ** 40 }), fc.integer({ min: 0, max: BODY_BUCKET_MS * 3 }), (a, b, t, dt) => {
        const bodyA = Buffer.from(a);
        const bodyB = Buffer.from(b);
        const k = (body: Buffer, at: number, trigger = 'trigger-1') => deliveryIdentity({}, trigger, body, at).key;
        const sameBucket = Math.floor(t / BODY_BUCKET_MS) === Math.floor((t + dt) / BODY_BUCKET_MS);
        assert.equal(k(bodyA, t) === k(bodyA, t + dt), sameBucket);
        assert.equal(k(bodyA, t) === k(bodyB, t), bodyA.equals(bodyB));
        assert.notEqual(k(bodyA, t), k(bodyA, t, 'trigger-2'));
      }),
      { numRuns: runs(300) },
    );
  });
});
