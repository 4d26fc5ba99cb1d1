/**
 * Expressions see `delivery` ({id, headers}): a real GitHub-signed delivery through the
 * webhook route, its event told apart by a condition on a header, its id read; credentials
 * and signatures never reach an expression (the run's delivery_headers rule); a write_fact
 * mapping reads the same; replays (one, a replay of a replay, bulk) see the original's; a
 * test run takes headers beside its sample payload, lowercased and redacted the same way,
 * and a bad shape is a 422 with its pointer. Schedules see null: test/workflows/schedule.test.ts.
 */
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import { after, describe, it } from 'node:test';
import { sign as githubSign } from '@octokit/webhooks-methods';
import { expressionDelivery } from '../../src/triggers/delivery-headers.ts';
import { mockProvider, type MockProvider } from '../connectors/mock-provider.ts';
import { API, createModel, deliver, saveOk, startFlow, waitForRun, type Flow } from '../webhooks/helpers.ts';

const f: Flow = await startFlow({ WEBHOOK_RATE_LIMIT_MAX: '1000', ALLOW_PRIVATE_EGRESS: 'true' }, { worker: true });
const mock: MockProvider = await mockProvider();
after(() => mock.close());
const outbound = await f.api.post(`${API}/external_connectors`, {
  data: {
    type: 'external_connector',
    attributes: {
      name: 'events',
      type: 'http',
      auth_type: 'bearer_token',
      direction: 'outbound',
      secret: randomBytes(24).toString('hex'),
      config: { base_url: mock.url },
    },
  },
});
assert.equal(outbound.status, 201, outbound.text);
await createModel(f, 'github-events', [
  { name: 'delivery', type: 'string' },
  { name: 'event', type: 'string' },
]);

// The example of docs/workflows.md ("delivery"): push runs on, ping stops at the condition.
const STEPS = [
  { key: 'is_push', type: 'condition', config: { expression: 'delivery.headers."x-github-event" = "push"' } },
  { key: 'seen', type: 'transform', config: { expression: '{"event": delivery.headers."x-github-event", "id": delivery.id, "delivery": delivery}' } },
  {
    key: 'store',
    type: 'write_fact',
    config: { data_model_slug: 'github-events', mapping: { delivery: 'delivery.id', event: 'delivery.headers."x-github-event"' } },
  },
  {
    key: 'forward',
    type: 'http_request',
    config: {
      connector_id: outbound.body.data.id,
      method: 'POST',
      path: '/events/{event}',
      params: { event: 'delivery.headers."x-github-event"' },
      query: { delivery: 'delivery.id' },
      headers: { 'X-Agent': 'delivery.headers."user-agent"' },
      body: '{"delivery": delivery.id}',
    },
  },
];

const secret = randomBytes(20).toString('hex');
const connector = await f.api.post(`${API}/external_connectors`, {
  data: { type: 'external_connector', attributes: { name: 'github', auth_type: 'hmac', direction: 'inbound', secret, config: { signature_scheme: 'github' } } },
});
assert.equal(connector.status, 201, connector.text);
const saved = await saveOk(f, {
  wf_params: { name: 'GitHub', is_active: true },
  step_params: STEPS,
  trigger_params: [{ key: 'github', type: 'webhook', service_account_id: f.tenant.credentialId, inbound_connector_id: connector.body.data.id }],
});
const workflowId: string = saved.workflow.id;
const hookPath = `/api/v1/webhooks/${saved.tokens.github}`;

/** A delivery as GitHub sends it, signed with @octokit/webhooks-methods. */
async function githubDelivery(event: string, body: string) {
  const id = randomUUID();
  const signature = await githubSign(secret, body);
  const d = await deliver(f, hookPath, body, {
    'x-github-event': event,
    'x-github-delivery': id,
    'x-hub-signature-256': signature,
    'user-agent': 'GitHub-Hookshot/abc',
  });
  assert.equal(d.status, 202, d.text);
  return { id, signature, run: await waitForRun(f, d.body.workflow_run_id) };
}

const push = await githubDelivery('push', JSON.stringify({ ref: 'refs/heads/main', after: randomUUID() }));

describe('delivery in expressions', () => {
  it('a condition tells push from ping by X-GitHub-Event; a transform reads delivery.id', async () => {
    const a = push.run.attributes;
    assert.equal(a.status, 'succeeded', JSON.stringify(a));
    assert.equal(a.outcome, 'completed');
    const seen = a.steps[1].output;
    assert.equal(seen.event, 'push');
    // GitHub's X-GitHub-Delivery: the run's delivery_id (docs/webhooks.md, signature_scheme github).
    assert.equal(seen.id, push.id);
    assert.equal(a.delivery_id, push.id);
    assert.equal(seen.delivery.id, push.id);
    assert.equal(seen.delivery.headers['x-github-delivery'], push.id);
    assert.equal(seen.delivery.headers['user-agent'], 'GitHub-Hookshot/abc');
    assert.equal(seen.delivery.headers['content-type'], 'application/json');

    const ping = await githubDelivery('ping', JSON.stringify({ zen: 'Keep it logically awesome.', hook_id: randomUUID() }));
    assert.equal(ping.run.attributes.status, 'succeeded');
    assert.equal(ping.run.attributes.outcome, 'stopped_at_condition');
    assert.deepEqual(
      ping.run.attributes.steps.map((s: any) => s.status),
      ['succeeded', 'skipped', 'skipped', 'skipped'],
    );
  });

  it('never lets a credential or a signature reach an expression', async () => {
    const { headers } = push.run.attributes.steps[1].output.delivery;
    for (const name of ['authorization', 'x-hub-signature-256', 'cookie', 'proxy-authorization'])
      assert.equal(Object.hasOwn(headers, name), false, `${name} reached an expression`);
    assert.ok(!Object.values(headers).includes('[redacted]'), 'a redacted header is left out, not shown');
    // The run's delivery_headers show them redacted: the one rule, seen from both sides.
    assert.equal(push.run.attributes.delivery_headers['x-hub-signature-256'], '[redacted]');
    assert.equal(push.run.attributes.delivery_headers.authorization, '[redacted]');
    const text = JSON.stringify(push.run.attributes.steps);
    for (const s of [push.signature, push.signature.slice('sha256='.length), f.bearer, secret]) assert.ok(!text.includes(s), 'a secret in a step record');
  });

  it('an http_request reads the same delivery in its path, query, headers and body', async () => {
    assert.equal(push.run.attributes.steps[3].status, 'succeeded', JSON.stringify(push.run.attributes.steps[3]));
    const sent = mock.requests.filter((r) => r.path.startsWith('/events/'));
    assert.equal(sent.length, 1, 'the ping stopped before it');
    assert.equal(sent[0]!.method, 'POST');
    assert.equal(sent[0]!.path, `/events/push?delivery=${push.id}`);
    assert.equal(sent[0]!.headers['x-agent'], 'GitHub-Hookshot/abc');
    assert.deepEqual(JSON.parse(sent[0]!.body), { delivery: push.id });
  });

  it('a write_fact mapping reads the same delivery', async () => {
    const store = push.run.attributes.steps[2];
    assert.equal(store.status, 'succeeded', JSON.stringify(store));
    assert.equal(store.output.written, 1);
    const facts = await f.t.deps.db.selectFrom('facts').select('data').where('workspace_id', '=', f.tenant.workspaceId).execute();
    assert.ok(facts.some((r) => (r.data as any).delivery === push.id && (r.data as any).event === 'push'));
  });

  it('a replay, a replay of the replay and a bulk replay see the original delivery', async () => {
    const original = push.run;
    const expected = original.attributes.steps[1].output;
    const one = await f.api.post(`${API}/workflow_runs/${original.id}/replay`, { meta: { version: 'original' } });
    assert.equal(one.status, 201, one.text);
    assert.equal(one.body.data.attributes.delivery_id, null, 'a replay is no delivery');
    const replayed = await waitForRun(f, one.body.data.id);
    assert.deepEqual(replayed.attributes.steps[1].output, expected);

    const two = await f.api.post(`${API}/workflow_runs/${replayed.id}/replay`, { meta: { version: 'current' } });
    assert.equal(two.status, 201, two.text);
    assert.deepEqual((await waitForRun(f, two.body.data.id)).attributes.steps[1].output, expected);

    // The original swept: the replays' copy still knows the delivery. A bulk replay of the second one (its replay_of is the first).
    const deleted = await f.t.deps.db.deleteFrom('workflow_runs').where('id', '=', original.id).executeTakeFirst();
    assert.equal(deleted.numDeletedRows, 1n);
    const bulk = await f.api.post(`${API}/workflow_runs/replay?filter[replay_of]=${replayed.id}`, { meta: { version: 'original' } });
    assert.equal(bulk.status, 201, bulk.text);
    assert.equal(bulk.body.data.length, 1);
    assert.deepEqual((await waitForRun(f, bulk.body.data[0].id)).attributes.steps[1].output, expected);
  });
});

const testRunPath = `${API}/workflows/${workflowId}/test_run`;
const testRun = (attributes: Record<string, unknown>) => f.api.post(testRunPath, { data: { type: 'workflow_test_run', attributes } });

describe('a test run with headers', () => {
  it('sees them lowercased and redacted as a delivery, with the delivery-id header as delivery.id', async () => {
    const r = await testRun({
      payload: { ref: 'refs/heads/main' },
      headers: { 'X-GitHub-Event': 'push', 'Idempotency-Key': 'evt-7', Authorization: 'Bearer abc', 'X-Hub-Signature-256': 'sha256=00', 'X-Note': 'hi' },
    });
    assert.equal(r.status, 200, r.text);
    const steps = r.body.data.attributes.steps;
    assert.equal(steps[0].output, true);
    assert.deepEqual(steps[1].output.delivery, {
      id: 'evt-7',
      headers: { 'x-github-event': 'push', 'idempotency-key': 'evt-7', 'x-note': 'hi' },
    });
    // Each step's input shows what its expressions saw: the delivery too.
    assert.deepEqual(steps[0].input.delivery, steps[1].output.delivery);
    assert.equal(steps[2].facts[0].data.event, 'push');

    const ping = await testRun({ payload: {}, headers: { 'x-github-event': 'ping' }, delivery_id: 'd-1' });
    assert.equal(ping.status, 200, ping.text);
    assert.equal(ping.body.data.attributes.outcome, 'stopped_at_condition');
    assert.deepEqual(ping.body.data.attributes.steps[0].input.delivery, { id: 'd-1', headers: { 'x-github-event': 'ping' } });
  });

  it('without headers or an id sees no delivery, as a schedule’s run', async () => {
    const r = await testRun({ payload: {} });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.body.data.attributes.steps[0].input.delivery, null);
    assert.equal(r.body.data.attributes.outcome, 'stopped_at_condition');
  });

  it('refuses headers of a bad shape with a 422 naming the member', async () => {
    const cases: Array<[unknown, string]> = [
      [['x-github-event', 'push'], '/data/attributes/headers'],
      ['x-github-event: push', '/data/attributes/headers'],
      [{ 'x-github-event': 1 }, '/data/attributes/headers/x-github-event'],
      [{ 'x-a': { b: 'c' } }, '/data/attributes/headers/x-a'],
      [{ 'bad name': 'v' }, '/data/attributes/headers/bad name'],
      [{ 'a/b': 'v' }, '/data/attributes/headers/a~1b'],
      [{ 'x-a': 'one\r\nx-b: two' }, '/data/attributes/headers/x-a'],
      [Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`x-h${i}`, 'v'])), '/data/attributes/headers'],
    ];
    for (const [headers, pointer] of cases) {
      const r = await testRun({ payload: {}, headers });
      assert.equal(r.status, 422, `${JSON.stringify(headers)}: ${r.text}`);
      assert.equal(r.body.errors[0].source.pointer, pointer, r.text);
    }
    const id = await testRun({ payload: {}, delivery_id: 7 });
    assert.equal(id.status, 422, id.text);
    assert.equal(id.body.errors[0].source.pointer, '/data/attributes/delivery_id');
  });

  it('redacts the key header of the workflow’s api_key connector, whatever its name', async () => {
    const c = await f.api.post(`${API}/external_connectors`, {
      data: {
        type: 'external_connector',
        attributes: {
          name: 'keyed',
          auth_type: 'api_key',
          direction: 'inbound',
          secret: randomBytes(16).toString('hex'),
          config: { header_name: 'X-Hook-Pass' },
        },
      },
    });
    assert.equal(c.status, 201, c.text);
    const keyed = await saveOk(f, {
      wf_params: { name: 'Keyed', is_active: true },
      step_params: [{ key: 'all', type: 'transform', config: { expression: 'delivery' } }],
      trigger_params: [{ key: 'in', type: 'webhook', service_account_id: f.tenant.credentialId, inbound_connector_id: c.body.data.id }],
    });
    const r = await f.api.post(`${API}/workflows/${keyed.workflow.id}/test_run`, {
      data: { type: 'workflow_test_run', attributes: { payload: {}, headers: { 'X-Hook-Pass': 'plain words', 'X-Shop': 'north' } } },
    });
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.body.data.attributes.steps[0].output, { id: null, headers: { 'x-shop': 'north' } });
  });
});

describe('the example of docs/workflows.md', () => {
  const doc = fs.readFileSync(new URL('../../docs/workflows.md', import.meta.url), 'utf8');
  const section = doc.slice(doc.indexOf('### delivery'));
  const [steps, delivery] = [...section.matchAll(/```json\n([^]*?)```/g)].slice(0, 2).map((m) => JSON.parse(m[1]!));

  it('tells push from ping as it says, over the delivery it shows', async () => {
    const { workflow } = await saveOk(f, { wf_params: { name: 'Docs example', is_active: true }, step_params: steps });
    const run = (event: string) =>
      f.api.post(`${API}/workflows/${workflow.id}/test_run`, {
        data: { type: 'workflow_test_run', attributes: { payload: {}, headers: { ...delivery.headers, 'x-github-event': event }, delivery_id: delivery.id } },
      });
    const pushed = await run('push');
    assert.equal(pushed.status, 200, pushed.text);
    assert.equal(pushed.body.data.attributes.outcome, 'completed');
    assert.deepEqual(pushed.body.data.attributes.steps[1].output, { event: 'push', delivery: delivery.id });
    assert.deepEqual(pushed.body.data.attributes.steps[0].input.delivery, delivery);
    const pinged = await run('ping');
    assert.equal(pinged.body.data.attributes.outcome, 'stopped_at_condition');
  });
});

describe('expressionDelivery', () => {
  it('is null without an id and headers, and leaves out redacted headers', () => {
    assert.equal(expressionDelivery(null, null), null);
    assert.deepEqual(expressionDelivery('d', null), { id: 'd', headers: {} });
    assert.deepEqual(expressionDelivery(null, { a: '1', authorization: '[redacted]' }), { id: null, headers: { a: '1' } });
    const proto = expressionDelivery('d', JSON.parse('{"__proto__": "x"}'))!;
    assert.equal(Object.getPrototypeOf(proto.headers), Object.prototype);
    assert.equal(Object.hasOwn(proto.headers, '__proto__'), true);
  });
});
