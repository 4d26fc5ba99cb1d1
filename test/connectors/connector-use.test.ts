/**
 * Who may use a connector: only an admin or owner may save a workflow with an http_request
 * step, and a run calls out only while the membership that saved the version's steps is
 * still an active admin or owner; otherwise the step fails for good and no call is made.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import * as admin from '../../src/admin/service.ts';
import { assertJsonApiError, jsonApi, seedAccount, tokenFor } from '../helpers/app.ts';
import { API, builderState, deliver, saveOk, startFlow, waitForRun, type Flow } from '../webhooks/helpers.ts';
import { mockProvider, type MockProvider } from './mock-provider.ts';

const f: Flow = await startFlow({ ALLOW_PRIVATE_EGRESS: 'true' });
const mock: MockProvider = await mockProvider();
after(() => mock.close());

/** A Flow whose JSON:API calls are made as a new account of `role` in the same workspace. */
async function as(role: 'member' | 'admin'): Promise<Flow & { membershipId: string }> {
  const account = await seedAccount(f.t.deps, f.tenant, { role, scopes: ['api_read', 'api_write'] });
  return { ...f, api: jsonApi(f.t, await tokenFor(f.t, account)), membershipId: account.membershipId };
}

const connectorId = (
  await f.api.post(`${API}/external_connectors`, {
    data: {
      type: 'external_connector',
      attributes: { name: 'Orders', auth_type: 'bearer_token', type: 'http', direction: 'outbound', secret: 'tok-orders-123', config: { base_url: mock.url } },
    },
  })
).body.data.id as string;

let paths = 0;
/** An http_request step to a path of its own, so the test can count the calls that reached it. */
function callStep(): { step: unknown; path: string } {
  const path = `/use/${++paths}`;
  return { path, step: { key: 'call', type: 'http_request', config: { connector_id: connectorId, method: 'POST', path, body: 'payload' } } };
}

let deliveries = 0;
async function runOnce(hook: string): Promise<any> {
  // A body of its own each time: the same body again would be a duplicate delivery.
  const d = await deliver(f, `/api/v1/webhooks/${hook}`, JSON.stringify({ n: 1, delivery: ++deliveries }));
  assert.equal(d.status, 202, d.text);
  return (await waitForRun(f, d.body.workflow_run_id)).attributes;
}

const calls = (path: string) => mock.requests.filter((r) => r.path === path).length;

describe('saving a workflow that calls out', () => {
  it('a member is refused with 403; an admin may; a member may still save workflows without http_request steps', async () => {
    const member = await as('member');
    const { step } = callStep();
    const refused = await member.api.post(`${API}/workflows/save_builder_state`, builderState(f, { step_params: [step] }));
    assertJsonApiError(refused, 403, 'forbidden');
    assert.match(refused.body.errors[0].detail, /Only an admin or owner may save a workflow with http_request steps/);
    await saveOk(member, { step_params: [{ key: 't', type: 'transform', config: { expression: 'payload' } }] });

    const adminFlow = await as('admin');
    const { step: adminStep, path } = callStep();
    const { tokens } = await saveOk(adminFlow, { step_params: [adminStep] });
    const run = await runOnce(tokens.hook!);
    assert.equal(run.status, 'succeeded', JSON.stringify(run));
    assert.equal(calls(path), 1);
  });

  it("a member cannot change an admin's workflow that calls out, not even its name", async () => {
    const { step } = callStep();
    const { workflow } = await saveOk(f, { step_params: [step] });
    const member = await as('member');
    const r = await member.api.post(
      `${API}/workflows/save_builder_state`,
      builderState(f, {
        workflow_id: workflow.id,
        lock_version: workflow.attributes.lock_version,
        wf_params: { name: 'Renamed', is_active: true },
        step_params: [step],
        trigger_params: workflow.attributes.triggers,
      }),
    );
    assertJsonApiError(r, 403, 'forbidden');
  });
});

describe('running a workflow that calls out', () => {
  it('after its saver is demoted to member, the step fails for good and no call reaches the provider; a save by an admin restores it', async () => {
    const saver = await as('admin');
    const { step, path } = callStep();
    const { workflow, tokens } = await saveOk(saver, { step_params: [step] });
    assert.equal((await runOnce(tokens.hook!)).status, 'succeeded');
    assert.equal(calls(path), 1);

    await f.t.deps.db.updateTable('org_memberships').set({ role: 'member' }).where('id', '=', saver.membershipId).execute();
    const run = await runOnce(tokens.hook!);
    assert.equal(run.status, 'failed', JSON.stringify(run));
    assert.equal(run.attempt, 1, 'not retried');
    assert.match(run.steps[0].error, /saved by a membership that is no longer an active admin or owner/);
    assert.match(run.error, /^Step call failed: /);
    assert.equal(calls(path), 1, 'no call reached the provider');

    // Saved again unchanged by another admin: the steps are now theirs.
    const other = await as('admin');
    const again = await other.api.post(
      `${API}/workflows/save_builder_state`,
      builderState(f, {
        workflow_id: workflow.id,
        lock_version: workflow.attributes.lock_version,
        step_params: [step],
        trigger_params: workflow.attributes.triggers,
      }),
    );
    assert.equal(again.status, 201, again.text);
    assert.equal(again.body.data.attributes.lock_version, workflow.attributes.lock_version, 'an unchanged save keeps lock_version');
    assert.equal((await runOnce(tokens.hook!)).status, 'succeeded');
    assert.equal(calls(path), 2);
  });

  it('after its saver is deactivated, or when no saver is recorded (saved before the rule), the step fails and nothing is called', async () => {
    const saver = await as('admin');
    const { step, path } = callStep();
    const { workflow, tokens } = await saveOk(saver, { step_params: [step] });
    await admin.deactivateMember(f.t.deps.db, saver.membershipId, new Date(f.t.deps.clock()));
    const run = await runOnce(tokens.hook!);
    assert.equal(run.status, 'failed', JSON.stringify(run));
    assert.equal(calls(path), 0);

    await f.t.deps.db.updateTable('workflow_versions').set({ saved_by_membership_id: null }).where('workflow_id', '=', workflow.id).execute();
    const unknown = await runOnce(tokens.hook!);
    assert.equal(unknown.status, 'failed');
    assert.match(unknown.steps[0].error, /an admin or owner must save the workflow again/);
    assert.equal(calls(path), 0);
  });

  it('a workflow without http_request steps runs whoever saved it', async () => {
    const member = await as('member');
    const { tokens } = await saveOk(member, { step_params: [{ key: 't', type: 'transform', config: { expression: 'payload.n' } }] });
    const run = await runOnce(tokens.hook!);
    assert.equal(run.status, 'succeeded');
    assert.equal(run.steps[0].output, 1);
  });
});
