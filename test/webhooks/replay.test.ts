/**
 * Replay protection for every signature scheme (issue 34 item 4): a captured, verified
 * delivery re-sent with a fresh Idempotency-Key, a fresh X-Alpha-Delivery, or a changed
 * unsigned id header (X-GitHub-Delivery, X-Shopify-Webhook-Id) is a duplicate, because the
 * identity its signature vouches for is guarded beside any header's; and a delivery answered
 * duplicate stores no key, so a key a replay brought stays free for a later, legitimate
 * delivery to another trigger of the organization. Each message is signed by the provider's
 * own code where it publishes one (standardwebhooks, svix, @octokit/webhooks-methods,
 * stripe) and by the published algorithm otherwise (Shopify, Slack; their vectors are in
 * signature-schemes.test.ts).
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import { sign as githubSign } from '@octokit/webhooks-methods';
import Stripe from 'stripe';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { Webhook as SvixWebhook } from 'svix';
import { signatureHeaders, type SignatureScheme } from '../../src/connectors/signature-schemes.ts';
import { tokenFor } from '../helpers/app.ts';
import { API, deliver, saveOk, startFlow, type Delivery, type Flow } from './helpers.ts';

const f: Flow = await startFlow({ WEBHOOK_RATE_LIMIT_MAX: '100000', MAX_CONNECTIONS_PER_ADDRESS: '0' }, { worker: false });
const STEPS = [{ key: 'note', type: 'transform', config: { expression: 'payload' } }];
const stripe = new Stripe('sk_test_unused');
const nowS = () => Math.floor(Date.now() / 1000);
const whsec = () => `whsec_${randomBytes(32).toString('base64')}`;
const fresh = (tag: string) => `${tag}-${randomBytes(6).toString('hex')}`;

async function trigger(connector: { secret: string; scheme: SignatureScheme } | null): Promise<string> {
  let id: string | null = null;
  if (connector !== null) {
    const c = await f.api.post(`${API}/external_connectors`, {
      data: {
        type: 'external_connector',
        attributes: { name: 'inbound', auth_type: 'hmac', direction: 'inbound', secret: connector.secret, config: { signature_scheme: connector.scheme } },
      },
    });
    assert.equal(c.status, 201, c.text);
    id = c.body.data.id;
  }
  const { tokens } = await saveOk(f, {
    step_params: STEPS,
    trigger_params: [{ key: 'hook', type: 'webhook', service_account_id: f.tenant.credentialId, inbound_connector_id: id }],
  });
  return `/api/v1/webhooks/${tokens.hook}`;
}

const outcome = (d: Delivery) => {
  assert.equal(d.status, 202, d.text);
  return d.body.status as 'accepted' | 'duplicate';
};

interface Sender {
  name: string;
  scheme: SignatureScheme;
  secret: string;
  /** The provider's headers for `body`, signed now. */
  sign(body: string): Promise<Record<string, string>>;
  /** The sender's unsigned id header, if it sends one. */
  idHeader?: string;
}

const senders: Sender[] = [
  (() => {
    const secret = whsec();
    return {
      name: 'standard_webhooks (standardwebhooks)',
      scheme: 'standard_webhooks' as const,
      secret,
      sign: async (body: string) => {
        const id = fresh('msg');
        const at = new Date();
        return {
          'webhook-id': id,
          'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
          'webhook-signature': new StandardWebhook(secret).sign(id, at, body),
        };
      },
    };
  })(),
  (() => {
    const secret = whsec();
    return {
      name: 'standard_webhooks (svix)',
      scheme: 'standard_webhooks' as const,
      secret,
      sign: async (body: string) => {
        const id = fresh('msg');
        const at = new Date();
        return { 'svix-id': id, 'svix-timestamp': String(Math.floor(at.getTime() / 1000)), 'svix-signature': new SvixWebhook(secret).sign(id, at, body) };
      },
    };
  })(),
  (() => {
    const secret = randomBytes(20).toString('hex');
    return {
      name: 'github',
      scheme: 'github' as const,
      secret,
      idHeader: 'x-github-delivery',
      sign: async (body: string) => ({ 'x-github-delivery': crypto.randomUUID(), 'x-hub-signature-256': await githubSign(secret, body) }),
    };
  })(),
  (() => {
    const secret = whsec();
    return {
      name: 'stripe',
      scheme: 'stripe' as const,
      secret,
      sign: async (body: string) => ({ 'stripe-signature': stripe.webhooks.generateTestHeaderString({ payload: body, secret, timestamp: nowS() }) }),
    };
  })(),
  (() => {
    const secret = randomBytes(16).toString('hex');
    return {
      name: 'shopify',
      scheme: 'shopify' as const,
      secret,
      idHeader: 'x-shopify-webhook-id',
      sign: async (body: string) => signatureHeaders('shopify', secret, body, crypto.randomUUID(), nowS()),
    };
  })(),
  (() => {
    const secret = randomBytes(16).toString('hex');
    return { name: 'slack', scheme: 'slack' as const, secret, sign: async (body: string) => signatureHeaders('slack', secret, body, '', nowS()) };
  })(),
];

// A trigger of the same organization that verifies nothing: its deliveries are identified by their headers alone.
const bare = await trigger(null);

for (const s of senders) {
  describe(s.name, async () => {
    const path = await trigger({ secret: s.secret, scheme: s.scheme });

    it('a captured delivery re-sent with a fresh Idempotency-Key or X-Alpha-Delivery is a duplicate', async () => {
      const body = JSON.stringify({ id: fresh('evt'), kind: s.scheme });
      const captured = await s.sign(body);
      assert.equal(outcome(await deliver(f, path, body, captured)), 'accepted');
      for (let i = 0; i < 3; i++) {
        assert.equal(outcome(await deliver(f, path, body, { ...captured, 'idempotency-key': fresh('key') })), 'duplicate');
        assert.equal(outcome(await deliver(f, path, body, { ...captured, 'x-alpha-delivery': fresh('alpha') })), 'duplicate');
        assert.equal(outcome(await deliver(f, path, body, { ...captured, 'x-gamma-idempotency-token': fresh('gamma') })), 'duplicate');
      }
      assert.equal(outcome(await deliver(f, path, body, captured)), 'duplicate');
      // Another message (another body, signed) runs.
      const next = JSON.stringify({ id: fresh('evt'), kind: s.scheme });
      assert.equal(outcome(await deliver(f, path, next, await s.sign(next))), 'accepted');
    });

    it('the first delivery’s own Idempotency-Key is kept beside its signed identity', async () => {
      const body = JSON.stringify({ id: fresh('evt'), kind: s.scheme });
      const key = fresh('own');
      assert.equal(outcome(await deliver(f, path, body, { ...(await s.sign(body)), 'idempotency-key': key })), 'accepted');
      // The contract's identity holds per organization: that key is taken for any trigger.
      assert.equal(outcome(await deliver(f, bare, '{"other":true}', { 'idempotency-key': key })), 'duplicate');
    });

    it('a duplicate stores no key: a key a replay brought stays free for a legitimate delivery to another trigger', async () => {
      const body = JSON.stringify({ id: fresh('evt'), kind: s.scheme });
      const captured = await s.sign(body);
      assert.equal(outcome(await deliver(f, path, body, captured)), 'accepted');
      const poisoned = `order-${fresh(s.scheme)}-created`;
      const alpha = fresh('alpha-poison');
      assert.equal(outcome(await deliver(f, path, body, { ...captured, 'idempotency-key': poisoned })), 'duplicate');
      assert.equal(outcome(await deliver(f, path, body, { ...captured, 'x-alpha-delivery': alpha })), 'duplicate');
      const legit = await deliver(f, bare, JSON.stringify({ order: poisoned }), { 'idempotency-key': poisoned });
      assert.equal(outcome(legit), 'accepted', 'the key a duplicate brought was not stored');
      assert.equal(outcome(await deliver(f, bare, JSON.stringify({ order: alpha }), { 'x-alpha-delivery': alpha })), 'accepted');
      // And once it is taken by the legitimate delivery, it is that delivery's.
      assert.equal(outcome(await deliver(f, bare, JSON.stringify({ order: poisoned }), { 'idempotency-key': poisoned })), 'duplicate');
    });

    if (s.idHeader !== undefined) {
      const idHeader = s.idHeader;
      it(`a changed ${idHeader} (not covered by the HMAC) is a duplicate, hours later too`, async () => {
        const body = JSON.stringify({ id: fresh('evt'), kind: s.scheme });
        const captured = await s.sign(body);
        assert.equal(outcome(await deliver(f, path, body, captured)), 'accepted');
        assert.equal(outcome(await deliver(f, path, body, { ...captured, [idHeader]: crypto.randomUUID() })), 'duplicate');
        const { [idHeader]: _dropped, ...withoutId } = captured;
        assert.equal(outcome(await deliver(f, path, body, withoutId)), 'duplicate');
        const real = f.t.deps.clock;
        const later = real() + 3 * 3600 * 1000;
        f.t.deps.clock = () => later;
        try {
          const bearer = await tokenFor(f.t, f.tenant);
          assert.equal(outcome(await deliver(f, path, body, { ...captured, [idHeader]: crypto.randomUUID() }, bearer)), 'duplicate');
          assert.equal(
            outcome(await deliver(f, path, body, { ...captured, [idHeader]: crypto.randomUUID(), 'idempotency-key': fresh('k') }, bearer)),
            'duplicate',
          );
        } finally {
          f.t.deps.clock = real;
        }
      });

      it(`the run shows the sender’s ${idHeader} as its delivery_id`, async () => {
        const body = JSON.stringify({ id: fresh('evt'), kind: s.scheme });
        const headers = await s.sign(body);
        const a = await deliver(f, path, body, headers);
        assert.equal(outcome(a), 'accepted');
        const run = await f.api.get(`${API}/workflow_runs/${a.body.workflow_run_id}`);
        assert.equal(run.body.data.attributes.delivery_id, headers[idHeader]);
      });
    }
  });
}

describe('concurrent replays', () => {
  it('one captured message under 8 fresh keys at once: one run, and none of the keys is taken', async () => {
    for (const s of senders) {
      const path = await trigger({ secret: s.secret, scheme: s.scheme });
      const body = JSON.stringify({ id: fresh('race'), kind: s.scheme });
      const captured = await s.sign(body);
      const keys = Array.from({ length: 8 }, (_, i) => `race-${i}-${fresh(s.scheme)}`);
      const answers = await Promise.all(keys.map((k) => deliver(f, path, body, { ...captured, 'idempotency-key': k })));
      const outcomes = answers.map(outcome);
      assert.equal(outcomes.filter((o) => o === 'accepted').length, 1, `${s.name}: ${outcomes.join()}`);
      // The winner's key is kept beside its signed identity; every other key is free.
      const winner = keys[outcomes.indexOf('accepted')]!;
      for (const k of keys) {
        const later = outcome(await deliver(f, bare, JSON.stringify({ k }), { 'idempotency-key': k }));
        assert.equal(later, k === winner ? 'duplicate' : 'accepted', `${s.name}: ${k}`);
      }
    }
  });
});
