/**
 * Form-encoded deliveries on a trigger with `accept: form` (docs/webhooks.md, Form posts):
 * GitHub's form content type signed by @octokit/webhooks-methods over the raw body, Slack's
 * slash commands and interactivity signed as Slack's docs describe, each verified over the
 * raw bytes and then decoded. Without the opt-in a form post is told the setting; a bad
 * `accept` is refused at save with its pointer.
 */
import assert from 'node:assert/strict';
import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import { after, describe, it } from 'node:test';
import { sign as githubSign } from '@octokit/webhooks-methods';
import { FORM_NOT_ACCEPTED } from '../../src/webhooks/surface.ts';
import { MAX_FORM_FIELDS } from '../../src/webhooks/form.ts';
import { createRelay } from '../../src/relay/relay.ts';
import { loadConfig } from '../../src/config.ts';
import { capturingLogger } from '../helpers/app.ts';
import { API, deliver, save, saveOk, startFlow, type Flow } from './helpers.ts';

const f: Flow = await startFlow({ WEBHOOK_RATE_LIMIT_MAX: '10000' }, { worker: false });
const STEPS = [{ key: 'note', type: 'transform', config: { expression: 'payload' } }];
const FORM = 'application/x-www-form-urlencoded';
const GH_SECRET = randomBytes(20).toString('hex');
const SLACK_SECRET = randomBytes(16).toString('hex');

async function connector(scheme: string, secret: string): Promise<string> {
  const c = await f.api.post(`${API}/external_connectors`, {
    data: {
      type: 'external_connector',
      attributes: { name: `in-${scheme}`, auth_type: 'hmac', direction: 'inbound', secret, config: { signature_scheme: scheme } },
    },
  });
  assert.equal(c.status, 201, c.text);
  return c.body.data.id;
}
const github = await connector('github', GH_SECRET);
const slack = await connector('slack', SLACK_SECRET);

/** A workflow with one webhook trigger `hook`; its path and the saved workflow. */
async function hook(members: Record<string, unknown>): Promise<{ path: string; workflow: any }> {
  const { tokens, workflow } = await saveOk(f, {
    wf_params: { name: `form-${randomBytes(4).toString('hex')}`, is_active: true },
    step_params: STEPS,
    trigger_params: [{ key: 'hook', type: 'webhook', service_account_id: f.tenant.credentialId, ...members }],
  });
  return { path: `/api/v1/webhooks/${tokens.hook}`, workflow };
}

async function runPayload(runId: string): Promise<unknown> {
  const r = await f.api.get(`${API}/workflow_runs/${runId}`);
  assert.equal(r.status, 200, r.text);
  return r.body.data.attributes.payload;
}

/** GitHub's "application/x-www-form-urlencoded" content type: the event's JSON in one `payload` field. */
async function githubForm(event: unknown): Promise<{ body: string; headers: Record<string, string> }> {
  const body = new URLSearchParams({ payload: JSON.stringify(event) }).toString();
  return {
    body,
    headers: { 'content-type': FORM, 'x-github-delivery': randomUUID(), 'x-github-event': 'push', 'x-hub-signature-256': await githubSign(GH_SECRET, body) },
  };
}

/** Slack's request signing: v0= HMAC-SHA256 of `v0:<timestamp>:<raw body>` under the signing secret, in hex. */
function slackHeaders(body: string, at = Math.floor(Date.now() / 1000)): Record<string, string> {
  const signature = `v0=${createHmac('sha256', SLACK_SECRET).update(`v0:${at}:${body}`).digest('hex')}`;
  return { 'content-type': FORM, 'x-slack-request-timestamp': String(at), 'x-slack-signature': signature };
}

const EVENT = {
  ref: 'refs/heads/main',
  repository: { full_name: 'octo/hello', private: false },
  head_commit: { id: '6dcb09b5b57875f334f61aebed695e2e4193db5e', message: 'Grüße & +1 = 100% done?' },
  commits: [{ added: ['a b.txt'], removed: [] }],
  // Kept as is: the decoded JSON is the payload, never unwrapped again.
  payload: 'inner',
};

describe('GitHub, form content type, accept: form', () => {
  it('verifies over the form-encoded raw body; the run payload is the decoded JSON; a replay keeps it', async () => {
    const { path } = await hook({ inbound_connector_id: github, accept: 'form' });
    const d = await githubForm(EVENT);
    const r = await deliver(f, path, d.body, d.headers);
    assert.equal(r.status, 202, r.text);
    assert.equal(r.body.status, 'accepted');
    assert.deepEqual(await runPayload(r.body.workflow_run_id), EVENT);

    // Redelivered (same body): a duplicate, as with JSON.
    const again = await deliver(f, path, d.body, { ...d.headers, 'x-github-delivery': randomUUID() });
    assert.equal(again.body.status, 'duplicate', again.text);

    const replay = await f.api.post(`${API}/workflow_runs/${r.body.workflow_run_id}/replay`, undefined);
    assert.equal(replay.status, 201, replay.text);
    assert.deepEqual(await runPayload(replay.body.data.id), EVENT, 'the stored payload, not parsed again');
  });

  it('a byte changed after signing is refused before the body is read', async () => {
    const { path } = await hook({ inbound_connector_id: github, accept: 'form' });
    const d = await githubForm({ ...EVENT, ref: 'refs/heads/dev' });
    const r = await deliver(f, path, d.body.replace('dev', 'dew'), d.headers);
    assert.equal(r.status, 401, r.text);
    assert.deepEqual(r.body, { error: 'Unauthorized', detail: 'signature mismatch' });
  });

  it('a JSON body still works on the same trigger', async () => {
    const { path } = await hook({ inbound_connector_id: github, accept: 'form' });
    const body = JSON.stringify(EVENT);
    const r = await deliver(f, path, body, { 'content-type': 'application/json', 'x-hub-signature-256': await githubSign(GH_SECRET, body) });
    assert.equal(r.status, 202, r.text);
    assert.equal(await runPayload(r.body.workflow_run_id), 'inner', 'a JSON body keeps its payload member rule');
  });

  it('without the opt-in: verified, then 422 Processing failed naming the setting', async () => {
    const { path, workflow } = await hook({ inbound_connector_id: github });
    assert.equal(workflow.attributes.triggers[0].accept, 'json', 'the default, shown');
    const d = await githubForm(EVENT);
    const r = await deliver(f, path, d.body, d.headers);
    assert.equal(r.status, 422, r.text);
    assert.deepEqual(r.body, { error: 'Processing failed', detail: FORM_NOT_ACCEPTED });
    assert.match(FORM_NOT_ACCEPTED, /application\/x-www-form-urlencoded; set accept: form on the trigger/);
    // The signature comes first, as for any body.
    const forged = await deliver(f, path, d.body, { ...d.headers, 'x-hub-signature-256': await githubSign('another-secret-0123', d.body) });
    assert.equal(forged.status, 401, forged.text);
  });

  it('a trigger switched to form (and back) answers by its saved setting at once, whatever the process cached', async () => {
    const { path, workflow } = await hook({ inbound_connector_id: github, accept: 'form' });
    const ok = await githubForm({ n: 1 });
    assert.equal((await deliver(f, path, ok.body, ok.headers)).status, 202);
    const trigger = workflow.attributes.triggers[0];
    const resave = (accept: string) =>
      saveOk(f, {
        workflow_id: workflow.id,
        wf_params: { name: workflow.attributes.name, is_active: true },
        step_params: STEPS,
        trigger_params: [{ ...trigger, accept }],
      });
    await resave('json');
    const refused = await githubForm({ n: 2 });
    const r = await deliver(f, path, refused.body, refused.headers);
    assert.equal(r.status, 422, r.text);
    assert.equal(r.body.detail, FORM_NOT_ACCEPTED);
    await resave('form');
    const back = await githubForm({ n: 3 });
    const b = await deliver(f, path, back.body, back.headers);
    assert.equal(b.status, 202, b.text);
    assert.deepEqual(await runPayload(b.body.workflow_run_id), { n: 3 });
  });
});

describe('Slack, accept: form', () => {
  it('a slash command signed v0 over timestamp and raw body: the payload is its fields', async () => {
    const { path } = await hook({ inbound_connector_id: slack, accept: 'form' });
    const fields = {
      token: 'gIkuvaNzQIHg97ATvDxqgjtO',
      team_id: 'T0001',
      team_domain: 'example',
      channel_id: 'C2147483705',
      user_name: 'Steve',
      command: '/weather',
      text: '94070 & tomorrow, 100%',
      response_url: 'https://hooks.slack.com/commands/1234/5678',
      trigger_id: '13345224609.738474920.8088930838d88f008e0',
    };
    const body = new URLSearchParams(fields).toString();
    const r = await deliver(f, path, body, slackHeaders(body));
    assert.equal(r.status, 202, r.text);
    assert.deepEqual(await runPayload(r.body.workflow_run_id), fields);

    const stale = await deliver(f, path, body, slackHeaders(body, Math.floor(Date.now() / 1000) - 600));
    assert.equal(stale.status, 401, stale.text);
  });

  it('a name sent again is every value, in order; __proto__ is left out and pollutes nothing', async () => {
    const { path } = await hook({ inbound_connector_id: slack, accept: 'form' });
    const body = 'tag=a&tag=b&__proto__[admin]=1&__proto__=x&constructor=y&tag=c&empty=';
    const r = await deliver(f, path, body, slackHeaders(body));
    assert.equal(r.status, 202, r.text);
    assert.deepEqual(await runPayload(r.body.workflow_run_id), { tag: ['a', 'b', 'c'], '__proto__[admin]': '1', empty: '' });
    assert.equal(({} as Record<string, unknown>).admin, undefined);
  });

  it('through the relay (Slack sends no bearer token): the form bytes and their signature arrive unchanged', async () => {
    const { path } = await hook({ inbound_connector_id: slack, accept: 'form' });
    const relay = await createRelay({
      config: loadConfig({ DATA_DIR: f.t.config.dataDir, SHUTDOWN_GRACE_MS: '1000' }),
      log: capturingLogger([], 'warn'),
      targetUrl: f.t.url,
      credentials: () => ({ clientId: f.tenant.clientId, clientSecret: f.tenant.clientSecret }),
      clock: Date.now,
    });
    after(() => relay.stop());
    const relayUrl = await relay.listen(0, '127.0.0.1');
    const body = 'command=%2Fdeploy&text=api+v2&user_id=U1';
    const res = await fetch(`${relayUrl}/hooks/${path.split('/').pop()}`, { method: 'POST', headers: slackHeaders(body), body });
    const answer = (await res.json()) as { workflow_run_id: string };
    assert.equal(res.status, 202, JSON.stringify(answer));
    assert.deepEqual(await runPayload(answer.workflow_run_id), { command: '/deploy', text: 'api v2', user_id: 'U1' });
  });

  it('interactivity: the payload field is JSON, decoded', async () => {
    const { path } = await hook({ inbound_connector_id: slack, accept: 'form' });
    const action = { type: 'block_actions', user: { id: 'U123' }, actions: [{ action_id: 'approve', value: 'yes' }] };
    const body = new URLSearchParams({ payload: JSON.stringify(action) }).toString();
    const r = await deliver(f, path, body, slackHeaders(body));
    assert.equal(r.status, 202, r.text);
    assert.deepEqual(await runPayload(r.body.workflow_run_id), action);
  });
});

it("docs/webhooks.md's form post gives the payload the docs show", async () => {
  const docs = fs.readFileSync(new URL('../../docs/webhooks.md', import.meta.url), 'utf8');
  const start = docs.indexOf('\n## Form posts\n');
  const section = docs.slice(start, docs.indexOf('\n## ', start + 5));
  const body = /--data-raw '([^']+)'/.exec(section)?.[1];
  const shown = /^```json\n([\s\S]*?)^```$/m.exec(section)?.[1];
  assert.ok(body && shown, 'the section has its example');
  const { path } = await hook({ accept: 'form' });
  const r = await deliver(f, path, body, { 'content-type': FORM });
  assert.equal(r.status, 202, r.text);
  assert.deepEqual(await runPayload(r.body.workflow_run_id), JSON.parse(shown));
  // Every refusal the section's table names is one the code answers.
  for (const detail of [FORM_NOT_ACCEPTED, `The form has more than ${MAX_FORM_FIELDS} fields`, 'The body is empty; send the form'])
    assert.ok(section.includes(`| \`${detail}\` |`), detail);
});

describe('form bodies a trigger refuses (422 Processing failed, the detail says why)', async () => {
  const { path } = await hook({ accept: 'form' });
  const refused = async (body: string, detail: RegExp, contentType = FORM) => {
    const r = await deliver(f, path, body, { 'content-type': contentType });
    assert.equal(r.status, 422, r.text);
    assert.equal(r.body.error, 'Processing failed');
    assert.match(r.body.detail, detail);
  };
  it('a payload field that is not JSON, or nested too deep, or sent twice', async () => {
    await refused('payload=%7Bnot+json', /^The form field payload is not valid JSON$/);
    await refused(`payload=${'%5B'.repeat(65)}${'%5D'.repeat(65)}`, /^The form field payload holds JSON the service refuses: .*deeper than 64/);
    await refused('payload=%7B%22a%22%3A%22%5Cu0000%22%7D', /^The form field payload holds JSON the service refuses: .*\(at \/a\)$/);
    await refused('payload=1&payload=2', /^The form field payload is sent 2 times; send it once$/);
  });
  it(`more than ${MAX_FORM_FIELDS} fields, a NUL, an empty body, another media type`, async () => {
    await refused(Array.from({ length: MAX_FORM_FIELDS + 1 }, (_, i) => `f${i}=1`).join('&'), new RegExp(`more than ${MAX_FORM_FIELDS} fields`));
    await refused('a=%00', /cannot store \(at \/a\)$/);
    await refused('', /^The body is empty; send the form$/);
    await refused('a=1', /^Content-Type must be application\/json or application\/x-www-form-urlencoded$/, 'multipart/form-data; boundary=x');
    const ok = await deliver(f, path, Array.from({ length: MAX_FORM_FIELDS }, (_, i) => `f${i}=1`).join('&'), { 'content-type': `${FORM}; charset=UTF-8` });
    assert.equal(ok.status, 202, ok.text);
  });
});

describe('accept at save', () => {
  it('is json or form, with a pointer to the bad value; a schedule has none', async () => {
    for (const accept of ['xml', 'FORM', 1, true]) {
      const r = await save(f, { step_params: STEPS, trigger_params: [{ key: 'hook', type: 'webhook', service_account_id: f.tenant.credentialId, accept }] });
      assert.equal(r.status, 422, r.text);
      assert.equal(r.body.errors[0].source.pointer, '/data/attributes/trigger_params/0/accept');
      assert.match(r.body.errors[0].detail, /^accept must be one of json, form/);
    }
    const schedule = await save(f, { step_params: STEPS, trigger_params: [{ key: 'tick', type: 'schedule', cron: '0 * * * *', accept: 'form' }] });
    assert.equal(schedule.status, 422, schedule.text);
    assert.equal(schedule.body.errors[0].source.pointer, '/data/attributes/trigger_params/0/accept');
  });

  it('json said or left out is the same graph: the same lock_version', async () => {
    const name = `same-${randomBytes(4).toString('hex')}`;
    const trigger = { key: 'hook', type: 'webhook', service_account_id: f.tenant.credentialId };
    const { workflow } = await saveOk(f, { wf_params: { name, is_active: true }, step_params: STEPS, trigger_params: [trigger] });
    const id = workflow.attributes.triggers[0].id;
    const again = await saveOk(f, {
      workflow_id: workflow.id,
      wf_params: { name, is_active: true },
      step_params: STEPS,
      trigger_params: [{ ...trigger, id, accept: 'json' }],
    });
    assert.equal(again.workflow.attributes.lock_version, workflow.attributes.lock_version);
    const form = await saveOk(f, {
      workflow_id: workflow.id,
      wf_params: { name, is_active: true },
      step_params: STEPS,
      trigger_params: [{ ...trigger, id, accept: 'form' }],
    });
    assert.notEqual(form.workflow.attributes.lock_version, workflow.attributes.lock_version);
    assert.equal(form.workflow.attributes.triggers[0].accept, 'form');
  });
});
