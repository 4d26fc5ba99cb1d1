/**
 * The signature schemes of real senders on an hmac connector: each accepts what the
 * provider's own signing code (or its published algorithm and documented vector) produces
 * and refuses a changed body, a wrong secret, a stale timestamp and missing headers, with a
 * `detail` that says which. A bearer token that expired or is invalid says so too. The
 * message id a verified sender signs is the delivery identity after the four headers.
 */
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import { sign as githubSign } from '@octokit/webhooks-methods';
import Stripe from 'stripe';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { Webhook as SvixWebhook } from 'svix';
import { signatureHeaders, verifySignature, type SignatureScheme } from '../../src/connectors/signature-schemes.ts';
import { signToken } from '../../src/auth/tokens.ts';
import { deliveryIdentity } from '../../src/triggers/identity.ts';
import { capturingLogger, tokenFor } from '../helpers/app.ts';
import { API, deliver, saveOk, startFlow, type Flow } from './helpers.ts';

const lines: Array<Record<string, unknown>> = [];
const f: Flow = await startFlow({ WEBHOOK_RATE_LIMIT_MAX: '1000' }, { worker: false, log: capturingLogger(lines, 'debug') });
const STEPS = [{ key: 'note', type: 'transform', config: { expression: 'payload' } }];
const stripe = new Stripe('sk_test_unused');

async function connector(secret: string, config: Record<string, unknown> | null, authType = 'hmac') {
  return f.api.post(`${API}/external_connectors`, {
    data: { type: 'external_connector', attributes: { name: 'inbound', auth_type: authType, direction: 'inbound', secret, config } },
  });
}
async function hook(secret: string, scheme: SignatureScheme | undefined): Promise<string> {
  const c = await connector(secret, scheme === undefined ? null : { signature_scheme: scheme });
  assert.equal(c.status, 201, c.text);
  const { tokens } = await saveOk(f, {
    step_params: STEPS,
    trigger_params: [{ key: 'hook', type: 'webhook', service_account_id: f.tenant.credentialId, inbound_connector_id: c.body.data.id }],
  });
  return `/api/v1/webhooks/${tokens.hook}`;
}
const refused = (d: { status: number; body: any; text: string }, detail: string) => {
  assert.equal(d.status, 401, d.text);
  assert.deepEqual(d.body, { error: 'Unauthorized', detail });
};
const nowS = () => Math.floor(Date.now() / 1000);
const STALE = 10 * 60;

interface Sender {
  scheme: SignatureScheme;
  secret: string;
  /** The provider's headers for `body` signed with `secret` at `at` (seconds). */
  sign(secret: string, body: string, at: number): Promise<Record<string, string>>;
  stamped: boolean;
}
const whsec = () => `whsec_${randomBytes(32).toString('base64')}`;
const GH_SECRET = 'gh-secret-0123456789';
const SHOP_SECRET = 'shop-secret-0123456789';
const senders: Sender[] = [
  {
    scheme: 'standard_webhooks',
    secret: whsec(),
    stamped: true,
    sign: async (secret, body, at) => {
      const id = `msg_${randomBytes(6).toString('hex')}`;
      return { 'webhook-id': id, 'webhook-timestamp': String(at), 'webhook-signature': new StandardWebhook(secret).sign(id, new Date(at * 1000), body) };
    },
  },
  {
    scheme: 'standard_webhooks',
    secret: whsec(),
    stamped: true,
    sign: async (secret, body, at) => {
      const id = `msg_${randomBytes(6).toString('hex')}`;
      return { 'svix-id': id, 'svix-timestamp': String(at), 'svix-signature': new SvixWebhook(secret).sign(id, new Date(at * 1000), body) };
    },
  },
  {
    scheme: 'github',
    secret: randomBytes(20).toString('hex'),
    stamped: false,
    sign: async (secret, body) => ({ 'x-github-delivery': crypto.randomUUID(), 'x-hub-signature-256': await githubSign(secret, body) }),
  },
  {
    scheme: 'stripe',
    secret: whsec(),
    stamped: true,
    sign: async (secret, body, at) => ({ 'stripe-signature': stripe.webhooks.generateTestHeaderString({ payload: body, secret, timestamp: at }) }),
  },
  {
    // Shopify publishes the algorithm (base64 HMAC-SHA256 of the body), not a signer; its vector is fixed below.
    scheme: 'shopify',
    secret: randomBytes(16).toString('hex'),
    stamped: false,
    sign: async (secret, body, at) => signatureHeaders('shopify', secret, body, String(at), at),
  },
  {
    // Slack publishes the algorithm and a vector (below), not a signer.
    scheme: 'slack',
    secret: randomBytes(16).toString('hex'),
    stamped: true,
    sign: async (secret, body, at) => signatureHeaders('slack', secret, body, '', at),
  },
];

for (const [i, s] of senders.entries()) {
  describe(`${s.scheme} (${i})`, async () => {
    const path = await hook(s.secret, i === 0 ? undefined : s.scheme);
    const body = JSON.stringify({ id: `evt_${i}`, kind: s.scheme });
    it('accepts the provider’s signature', async () => {
      const d = await deliver(f, path, body, await s.sign(s.secret, body, nowS()));
      assert.equal(d.status, 202, d.text);
      assert.equal(d.body.status, 'accepted');
    });
    it('refuses a changed body', async () => {
      refused(await deliver(f, path, body.replace('evt_', 'evt-'), await s.sign(s.secret, body, nowS())), 'signature mismatch');
    });
    it('refuses a wrong secret', async () => {
      const other = s.secret.startsWith('whsec_') ? whsec() : randomBytes(16).toString('hex');
      refused(await deliver(f, path, body, await s.sign(other, body, nowS())), 'signature mismatch');
    });
    if (s.stamped) {
      it('refuses a stale and a future timestamp', async () => {
        refused(await deliver(f, path, body, await s.sign(s.secret, body, nowS() - STALE)), 'timestamp outside the tolerance');
        refused(await deliver(f, path, body, await s.sign(s.secret, body, nowS() + STALE)), 'timestamp outside the tolerance');
      });
    }
    it('refuses missing headers', async () => {
      refused(await deliver(f, path, body), 'missing signature headers');
      // Another scheme's headers are missing ones for this scheme.
      const foreign =
        s.scheme === 'github' ? signatureHeaders('shopify', s.secret, body, 'x', nowS()) : signatureHeaders('github', s.secret, body, 'x', nowS());
      refused(await deliver(f, path, body, foreign), 'missing signature headers');
    });
  });
}

describe('documented vectors', () => {
  it('Slack’s own example verifies at its timestamp, and not ten minutes later', () => {
    const body = Buffer.from(
      'token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA' +
        '&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554' +
        '%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c',
    );
    const headers = { 'x-slack-request-timestamp': '1531420618', 'x-slack-signature': 'v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503' };
    const digest = `sha256:${createHash('sha256').update(body).digest('hex')}`;
    // The signed timestamp with the body's digest is the identity.
    assert.deepEqual(verifySignature('slack', headers, body, '8f742231b10e8888abcd99yyyzzz85a5', 1531420618), {
      ok: true,
      signedId: { scheme: 'slack', value: `1531420618:${digest}`, shown: digest },
    });
    assert.deepEqual(verifySignature('slack', headers, body, '8f742231b10e8888abcd99yyyzzz85a5', 1531420618 + STALE), {
      ok: false,
      reason: 'timestamp outside the tolerance',
    });
  });
  it('GitHub’s own example verifies', () => {
    const headers = { 'x-hub-signature-256': 'sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17', 'x-github-delivery': 'd-1' };
    const digest = `sha256:${createHash('sha256').update('Hello, World!').digest('hex')}`;
    // The body's digest is the identity (X-GitHub-Delivery is not signed); the id only labels the run.
    assert.deepEqual(verifySignature('github', headers, Buffer.from('Hello, World!'), "It's a Secret to Everybody", 0), {
      ok: true,
      signedId: { scheme: 'github', value: digest, shown: 'd-1' },
    });
  });
  it('Shopify: base64 HMAC-SHA256 of the body, a fixed vector', () => {
    const body = Buffer.from('{"id":820982911946154508,"email":"jon@example.com"}');
    const headers = { 'x-shopify-hmac-sha256': 'D0UMXmhjwBRi4y66TmhJrDlhQABD7zI2fm3p6/QLMo8=', 'x-shopify-webhook-id': 'b54557e4-bdd9-4b37-8a5f-bf7d70bcd043' };
    assert.deepEqual(verifySignature('shopify', headers, body, 'hush', 0), {
      ok: true,
      signedId: { scheme: 'shopify', value: `sha256:${createHash('sha256').update(body).digest('hex')}`, shown: 'b54557e4-bdd9-4b37-8a5f-bf7d70bcd043' },
    });
    assert.deepEqual(verifySignature('shopify', headers, body, 'hush!', 0), { ok: false, reason: 'signature mismatch' });
  });
});

describe('connector config.signature_scheme', () => {
  it('422 with a pointer for an unknown scheme, or a scheme on a connector that does not sign', async () => {
    const unknown = await connector('s', { signature_scheme: 'paypal' });
    assert.equal(unknown.status, 422, unknown.text);
    assert.equal(unknown.body.errors[0].source.pointer, '/data/attributes/config/signature_scheme');
    const apiKey = await connector('s', { signature_scheme: 'github' }, 'api_key');
    assert.equal(apiKey.status, 422, apiKey.text);
    assert.equal(apiKey.body.errors[0].source.pointer, '/data/attributes/config/signature_scheme');
  });
  it('a raw secret is taken for a non-standard scheme, shown in reads; a later switch to api_key is refused', async () => {
    const c = await connector('plain-secret-0123456', { signature_scheme: 'slack' });
    assert.equal(c.status, 201, c.text);
    const r = await f.api.get(`${API}/external_connectors/${c.body.data.id}`);
    assert.equal(r.body.data.attributes.config.signature_scheme, 'slack');
    const p = await f.api.patch(`${API}/external_connectors/${c.body.data.id}`, {
      data: { type: 'external_connector', id: c.body.data.id, attributes: { auth_type: 'api_key' } },
    });
    assert.equal(p.status, 422, p.text);
    // The default scheme still wants a Standard Webhooks key.
    assert.equal((await connector('plain-secret', null)).status, 422);
  });
});

describe('failures a sender can act on', () => {
  it('the log says why, with the request id, never the signature', async () => {
    const path = await hook('log-secret-value', 'github');
    const sig = 'sha256=' + 'ab'.repeat(32);
    refused(await deliver(f, path, '{}', { 'x-hub-signature-256': sig, 'x-request-id': 'req-sig-1' }), 'signature mismatch');
    const line = lines.find((l) => l.msg === 'webhook signature refused' && l.reqId === 'req-sig-1');
    assert.ok(line, 'a log line with the reason');
    assert.equal(line.level, 30);
    assert.equal(line.reqId, 'req-sig-1', JSON.stringify(line));
    const all = JSON.stringify(lines);
    assert.ok(!all.includes('ab'.repeat(32)) && !all.includes('log-secret-value'));
  });
  it('an expired bearer token and an invalid one keep missing_credentials and say which', async () => {
    const path = await hook(whsec(), undefined);
    const expired = signToken(f.t.deps.signingKey, {
      sub: f.tenant.credentialId,
      org: f.tenant.organizationId,
      ws: f.tenant.workspaceId,
      scp: ['webhooks'],
      iat: Date.now() - 7_200_000,
      exp: nowS() - 60,
    } as any);
    const a = await deliver(f, path, '{}', {}, expired);
    assert.equal(a.status, 401, a.text);
    assert.deepEqual(a.body, { error: 'missing_credentials', detail: 'the bearer token has expired' });
    const b = await deliver(f, path, '{}', {}, `${f.bearer.slice(0, -2)}xx`);
    assert.deepEqual(b.body, { error: 'missing_credentials', detail: 'the bearer token is invalid' });
    const c = await deliver(f, path, '{}', {}, null);
    assert.deepEqual(c.body, { error: 'missing_credentials' });
  });
});

describe('the senders’ own delivery ids', () => {
  const status = (d: { status: number; body: any; text: string }) => {
    assert.equal(d.status, 202, d.text);
    return d.body.status as string;
  };
  const HOURS_3 = 3 * 3600 * 1000;

  it('a provider’s retry deduplicates across a body-bucket boundary; a re-sent signed id with another body is a duplicate, GitHub’s unsigned one is not', async () => {
    const github = await hook(GH_SECRET, 'github');
    const sw = new StandardWebhook(senders[0]!.secret);
    const standard = await hook(senders[0]!.secret, undefined);
    const body = JSON.stringify({ n: 'bucket' });
    const ghHeaders = { 'x-github-delivery': 'gh-delivery-1', 'x-hub-signature-256': await githubSign(GH_SECRET, body) };
    const swHeaders = (at: number, payload: string) => ({
      'webhook-id': 'msg_bucket',
      'webhook-timestamp': String(at),
      'webhook-signature': sw.sign('msg_bucket', new Date(at * 1000), payload),
    });
    assert.equal(status(await deliver(f, github, body, ghHeaders)), 'accepted');
    assert.equal(status(await deliver(f, standard, body, swHeaders(nowS(), body))), 'accepted');
    const plainStripe = await hook(senders[3]!.secret, 'stripe');
    const real = f.t.deps.clock;
    const later = real() + HOURS_3;
    f.t.deps.clock = () => later;
    try {
      const bearer = await tokenFor(f.t, f.tenant);
      const at = Math.floor(later / 1000);
      assert.equal(status(await deliver(f, github, body, ghHeaders, bearer)), 'duplicate');
      assert.equal(status(await deliver(f, standard, body, swHeaders(at, body), bearer)), 'duplicate');
      const changed = JSON.stringify({ n: 'bucket', edited: true });
      // GitHub signs the body only: another signed body is another message, whatever its X-GitHub-Delivery.
      assert.equal(
        status(await deliver(f, github, changed, { ...ghHeaders, 'x-hub-signature-256': await githubSign(GH_SECRET, changed) }, bearer)),
        'accepted',
      );
      assert.equal(status(await deliver(f, standard, changed, swHeaders(at, changed), bearer)), 'duplicate');
      // Stripe signs a timestamp with the body: signed again later it is another identity (Stripe's retries are signed anew).
      const h = await senders[3]!.sign(senders[3]!.secret, body, at);
      assert.equal(status(await deliver(f, plainStripe, body, h, bearer)), 'accepted');
      assert.equal(status(await deliver(f, plainStripe, body, h, bearer)), 'duplicate');
    } finally {
      f.t.deps.clock = real;
    }
  });

  it('Shopify: identical bodies under two X-Shopify-Webhook-Ids are one message (the id is not signed)', async () => {
    const shopify = await hook(SHOP_SECRET, 'shopify');
    const body = JSON.stringify({ n: 'twins' });
    const a = await deliver(f, shopify, body, signatureHeaders('shopify', SHOP_SECRET, body, 'wh-1', nowS()));
    const b = await deliver(f, shopify, body, signatureHeaders('shopify', SHOP_SECRET, body, 'wh-2', nowS()));
    assert.equal(status(a), 'accepted');
    assert.equal(status(b), 'duplicate');
    const run = await f.api.get(`${API}/workflow_runs/${a.body.workflow_run_id}`);
    assert.equal(run.body.data.attributes.delivery_id, 'wh-1');
  });

  it('a captured signed message replayed with a fresh Idempotency-Key is a duplicate; the header still comes first', async () => {
    const secret = whsec();
    const path = await hook(secret, undefined);
    const body = JSON.stringify({ n: 'replay' });
    const signed = {
      'webhook-id': 'msg_replay',
      'webhook-timestamp': String(nowS()),
      'webhook-signature': new StandardWebhook(secret).sign('msg_replay', new Date(), body),
    };
    const first = await deliver(f, path, body, { ...signed, 'idempotency-key': 'key-1' });
    assert.equal(status(first), 'accepted');
    const run = await f.api.get(`${API}/workflow_runs/${first.body.workflow_run_id}`);
    assert.equal(run.body.data.attributes.delivery_id, 'key-1');
    assert.equal(status(await deliver(f, path, body, { ...signed, 'idempotency-key': 'key-2' })), 'duplicate');
    assert.equal(status(await deliver(f, path, body, signed)), 'duplicate');
    // The replay stored no key: a new message under key-2 runs (replay.test.ts checks this for every scheme).
    const other = {
      'webhook-id': 'msg_replay_other',
      'webhook-timestamp': String(nowS()),
      'webhook-signature': new StandardWebhook(secret).sign('msg_replay_other', new Date(), body),
    };
    assert.equal(status(await deliver(f, path, body, { ...other, 'idempotency-key': 'key-2' })), 'accepted');
    // A new message under a new key runs.
    const next = {
      'webhook-id': 'msg_replay_2',
      'webhook-timestamp': String(nowS()),
      'webhook-signature': new StandardWebhook(secret).sign('msg_replay_2', new Date(), body),
    };
    assert.equal(status(await deliver(f, path, body, { ...next, 'idempotency-key': 'key-3' })), 'accepted');
  });

  it('one message to two triggers is a run for each', async () => {
    const secret = whsec();
    const [a, b] = [await hook(secret, undefined), await hook(secret, undefined)];
    const body = JSON.stringify({ n: 'fan-out' });
    const h = {
      'webhook-id': 'msg_fan',
      'webhook-timestamp': String(nowS()),
      'webhook-signature': new StandardWebhook(secret).sign('msg_fan', new Date(), body),
    };
    assert.equal(status(await deliver(f, a, body, h)), 'accepted');
    assert.equal(status(await deliver(f, b, body, h)), 'accepted');
  });
});

describe('signed ids beside the header identities', () => {
  it('a header keeps the key it always had; the signed id adds its own, per trigger', () => {
    const signed = { triggerId: 't-1', scheme: 'github', value: 'sha256:abc', shown: 'd-1' };
    const body = Buffer.from('{}');
    const plain = deliveryIdentity({ 'idempotency-key': 'k' }, 'hash', body, 0);
    const both = deliveryIdentity({ 'idempotency-key': 'k' }, 'hash', body, 0, signed);
    assert.equal(both.key, plain.key);
    assert.equal(both.deliveryId, 'k');
    assert.ok(both.signedKey?.startsWith('s:t-1:github:'));
    const alone = deliveryIdentity({}, 'hash', body, 0, signed);
    assert.equal(alone.key, both.signedKey);
    assert.equal(alone.deliveryId, 'd-1');
    assert.notEqual(deliveryIdentity({}, 'hash', body, 0, { ...signed, triggerId: 't-2' }).key, alone.key);
  });

  it('concurrent replays of one signed message under fresh Idempotency-Keys make one run', async () => {
    const secret = whsec();
    const path = await hook(secret, undefined);
    const body = JSON.stringify({ n: 'race' });
    const h = {
      'webhook-id': 'msg_race',
      'webhook-timestamp': String(nowS()),
      'webhook-signature': new StandardWebhook(secret).sign('msg_race', new Date(), body),
    };
    const answers = await Promise.all(Array.from({ length: 6 }, (_, i) => deliver(f, path, body, { ...h, 'idempotency-key': `race-${i}` })));
    for (const a of answers) assert.equal(a.status, 202, a.text);
    assert.equal(answers.filter((a) => a.body.status === 'accepted').length, 1);
  });
});
