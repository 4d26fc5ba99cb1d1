/**
 * Properties of connector redaction (src/connectors/redact.ts): for any secret, whatever
 * characters URL-encoding, form encoding, base64 and JSON escaping change in it, no form in
 * which the service sent a credential survives redaction of an answer that echoes it. The
 * forms are taken from what authorize() and the token request actually sent, not rebuilt
 * from redact.ts's own list.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { authorize, sentCredentials, tokenCache, type ConnectorRecord } from '../../src/connectors/auth.ts';
import type { HttpClient, OutboundRequest } from '../../src/connectors/http.ts';
import { providerExcerpt, redactor, PROVIDER_EXCERPT_CHARS } from '../../src/connectors/redact.ts';
import { runs } from '../helpers/property.ts';

// Characters that URL-encoding, form encoding, base64 and JSON escaping change, and plain ones.
// No '[' or ']': the marker '[redacted]' is made of them, and a secret holding a piece of it
// could meet that piece again beside the marker.
const UNIT = fc.oneof(
  fc.constantFrom(...' +/=&%:?#@"\\\'<>~!*().,;é€ü😀\u2028\t'),
  fc.constantFrom(...'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_'),
);
const secretArb = fc.string({ unit: UNIT, minLength: 8, maxLength: 60 });
const textArb = fc.string({ unit: fc.constantFrom(...'abc /=&%+"\\:{}'), maxLength: 20 });

/** What was sent for connector `c`: the authorized request's credential headers and the token request's body. */
async function sentForms(c: ConnectorRecord, accessToken: string): Promise<string[]> {
  let tokenBody = '';
  const http: HttpClient = {
    async send(req: OutboundRequest) {
      tokenBody = String(req.body);
      return { status: 200, headers: {}, body: { access_token: accessToken, expires_in: 3600 } };
    },
    close: async () => {},
  };
  const req: OutboundRequest = { method: 'POST', url: new URL('https://api.example.com/x'), headers: { accept: 'application/json' }, body: '{"a":1}' };
  const { request } = await authorize(
    c,
    req,
    tokenCache(http, true, () => 0),
    'msg-1',
    1_700_000_000,
  );
  const forms: string[] = [];
  for (const [name, value] of Object.entries(request.headers)) {
    // A Standard Webhooks signature is a MAC of the message, not the key: it need not be hidden.
    if (req.headers[name] === value || name.startsWith('webhook-')) continue;
    forms.push(value);
    const credentials = /^(?:Basic|Bearer) (.+)$/.exec(value);
    if (credentials) forms.push(credentials[1]!);
  }
  if (c.auth_type === 'basic_auth') forms.push(`${String(c.config?.username)}:${c.secret}`);
  if (tokenBody !== '') forms.push(tokenBody, /client_secret=[^&]*/.exec(tokenBody)![0]);
  if (c.auth_type === 'hmac') {
    const key = c.secret!.slice(6);
    forms.push(key, Buffer.from(key, 'base64').toString('base64url'));
  }
  forms.push(c.secret!);
  return forms;
}

const record = (auth_type: string, secret: string, config: Record<string, unknown>): ConnectorRecord => ({
  id: 'c1',
  auth_type,
  type: 'http',
  config,
  secret,
  updated_at: new Date(0),
});

const connectorArb = fc.oneof(
  secretArb.map((s) => record('api_key', s, { header_name: 'X-Key' })),
  secretArb.map((s) => record('bearer_token', s, {})),
  fc.tuple(secretArb, fc.string({ unit: UNIT, minLength: 1, maxLength: 20 })).map(([s, user]) => record('basic_auth', s, { username: user })),
  fc
    .tuple(secretArb, fc.string({ unit: UNIT, minLength: 1, maxLength: 20 }), fc.array(secretArb, { maxLength: 2 }))
    .map(([s, id, scopes]) => record('oauth2', s, { token_url: 'https://auth.example.com/t', client_id: id, scopes })),
  fc.uint8Array({ minLength: 16, maxLength: 48 }).map((key) => record('hmac', `whsec_${Buffer.from(key).toString('base64')}`, {})),
);

/** Every way an echo may spell a form: as is, percent-encoded (upper and lower hex), form-encoded, inside a JSON string. */
function spelled(form: string): string[] {
  const url = encodeURIComponent(form);
  const formEncoded = new URLSearchParams({ v: form }).toString().slice(2);
  return [form, url, url.toLowerCase() === url ? url : url.replace(/%[0-9A-F]{2}/g, (h) => h.toLowerCase()), formEncoded, JSON.stringify(form).slice(1, -1)];
}

test('no form the service sent survives redaction, however the answer spells it', async () => {
  await fc.assert(
    fc.asyncProperty(connectorArb, secretArb, textArb, textArb, async (c, accessToken, before, after) => {
      const forms = (await sentForms(c, accessToken)).filter((f) => f.length >= 4);
      const redact = redactor([...sentCredentials(c), accessToken, `Bearer ${accessToken}`]);
      for (const form of forms) {
        for (const s of spelled(form)) {
          const answer = { text: `${before}${s}${after}`, nested: [s], [s]: 'as a key' };
          const red = redact(answer);
          const strings = [red.text, ...red.nested, ...Object.keys(red)];
          for (const f of forms) {
            for (const spelling of spelled(f))
              assert.ok(!strings.some((x) => x.includes(spelling)), `${JSON.stringify(spelling)} survived in ${JSON.stringify(strings)}`);
          }
          assert.ok(red.text.includes('[redacted]'));
          assert.ok(!providerExcerpt(answer, redact).includes(JSON.stringify(c.secret).slice(1, -1)));
        }
      }
    }),
    { numRuns: runs(1000) },
  );
});

test('an excerpt is cut after redaction, so no prefix of a secret is left at the cut', () => {
  const secret = 'sk_' + 'q'.repeat(40);
  const body = { error: `${'x'.repeat(PROVIDER_EXCERPT_CHARS - 20)}${secret}` };
  const out = providerExcerpt(body, redactor([secret]));
  assert.ok(out.length <= PROVIDER_EXCERPT_CHARS + 3);
  assert.ok(!out.includes('sk_q'), out);
});
