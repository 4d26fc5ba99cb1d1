/**
 * Workflow state (docs/workflows.md, "Workflow state"): read as `state` by every expression,
 * written by set_state (the later steps see it), capped, never written by a test run, gone
 * with its workflow; and the docs' incremental sync run twice continues where it stopped.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, describe, it } from 'node:test';
import { API, createModel, deliver, saveOk, startFlow, waitForRun, type Flow } from '../webhooks/helpers.ts';
import { mockProvider, type Recorded } from '../connectors/mock-provider.ts';
import { parseDocumentText, readWorkflowFile } from '../../src/cli/workflow-files.ts';
import { STATE_MAX_BYTES } from '../../src/steps/set-state.ts';
import { builderParts, parseWorkflowText, renderYaml, workflowFileDocument, workflowOfResource } from '../../src/workflows/file.ts';

const f: Flow = await startFlow({ ALLOW_PRIVATE_EGRESS: 'true', RUN_MAX_ATTEMPTS: '2' }, { worker: true });
const mock = await mockProvider();
after(() => mock.close());

/** The shop: orders listed oldest first after a cursor (an order id), as tributary-orders' listOrders. */
const shop: Array<{ id: string; status: string; total: { amount: string; currency: string }; created_at: string }> = [];
const addOrders = (n: number) => {
  for (let i = 0; i < n; i++) {
    const k = shop.length + 1;
    shop.push({
      id: `ord_${String(k).padStart(10, '0')}`,
      status: 'open',
      total: { amount: `${k}.50`, currency: 'EUR' },
      created_at: `2026-11-0${1 + (k % 9)}T10:00:00Z`,
    });
  }
};
const queryOf = (r: Recorded) => Object.fromEntries(new URL(r.path, 'http://x').searchParams);
mock.fallback = (req) => {
  const q = queryOf(req);
  const from = q.cursor === undefined ? 0 : shop.findIndex((o) => o.id === q.cursor) + 1;
  // A page of 2 whatever the limit asked: the sync's pages are few and small here.
  const data = shop.slice(from, from + Math.min(2, Number(q.limit ?? 20)));
  const more = from + data.length < shop.length;
  return { status: 200, body: { data, next_cursor: more ? data.at(-1)!.id : null, end_cursor: data.at(-1)?.id ?? q.cursor ?? null } };
};
const lists = () => mock.requests.filter((r) => r.path.startsWith('/v1/orders'));

const c = await f.api.post(`${API}/external_connectors`, {
  data: {
    type: 'external_connector',
    attributes: {
      name: 'Shop',
      direction: 'outbound',
      provider_slug: 'tributary-orders',
      secret: `key_${'s'.repeat(40)}`,
      config: { base_url: `${mock.url}/v1` },
    },
  },
});
assert.equal(c.status, 201, c.text);
const connectorId: string = c.body.data.id;
await createModel(f, 'orders', [
  { name: 'order_id', type: 'string' },
  { name: 'amount', type: 'float' },
]);

let sent = 0;
/** A delivery's run, finished; each body is new (a delivery seen again is a duplicate). */
async function deliverTo(token: string, payload: Record<string, unknown> = {}): Promise<any> {
  const d = await deliver(f, `/api/v1/webhooks/${token}`, JSON.stringify({ ...payload, sent: ++sent }));
  assert.equal(d.status, 202, d.text);
  assert.ok(d.body.workflow_run_id, d.text);
  return (await waitForRun(f, d.body.workflow_run_id)).attributes;
}
const stateOf = async (workflowId: string) => {
  const r = await f.api.get(`${API}/workflow_states?filter[workflow_id]=${workflowId}`);
  assert.equal(r.status, 200, r.text);
  return r.body.data.length === 0 ? undefined : r.body.data[0].attributes.value;
};

describe('workflow state', () => {
  it("the docs' incremental sync, run twice, continues where the first stopped", async () => {
    const doc = fs.readFileSync(new URL('../../docs/workflows.md', import.meta.url), 'utf8');
    const yaml = /### An incremental sync[\s\S]*?```yaml\n([\s\S]*?)```/.exec(doc)![1]!;
    const file = readWorkflowFile('orders-sync.yaml', parseDocumentText('orders-sync.yaml', yaml));
    assert.deepEqual(
      file.triggers.map((t) => t.type),
      ['schedule'],
    );
    const steps = file.steps.map((s) => (s.type === 'http_request' ? { ...s, config: { ...s.config, connector_id: connectorId } } : s));
    // The schedule's ticks are the docs'; here a webhook starts the same steps when the test says.
    const { workflow, tokens } = await saveOk(f, { step_params: steps, wf_params: { name: file.name } });
    addOrders(5);
    const before = lists().length;
    const first = await deliverTo(tokens.hook!);
    assert.equal(first.outcome, 'completed', JSON.stringify(first.steps));
    assert.deepEqual(
      lists()
        .slice(before)
        .map((r) => queryOf(r).cursor),
      [undefined, 'ord_0000000002', 'ord_0000000004'],
    );
    assert.equal(first.facts_written, 5);
    assert.deepEqual(await stateOf(workflow.id), { cursor: 'ord_0000000005' });

    addOrders(3);
    const mid = lists().length;
    const second = await deliverTo(tokens.hook!);
    assert.equal(second.outcome, 'completed', JSON.stringify(second.steps));
    assert.deepEqual(
      lists()
        .slice(mid)
        .map((r) => queryOf(r).cursor),
      ['ord_0000000005', 'ord_0000000007'],
      'the second run lists from where the first stopped',
    );
    assert.deepEqual(
      second.steps[0].output.items.map((o: any) => o.id),
      ['ord_0000000006', 'ord_0000000007', 'ord_0000000008'],
    );
    assert.equal(second.facts_written, 3, 'only the new orders');
    assert.deepEqual(await stateOf(workflow.id), { cursor: 'ord_0000000008' });

    // Nothing new: the cursor stays.
    const third = await deliverTo(tokens.hook!);
    assert.equal(third.steps[0].output.items.length, 0);
    assert.deepEqual(await stateOf(workflow.id), { cursor: 'ord_0000000008' });
  });

  it('later steps of the run see the state set_state set; every expression reads it', async () => {
    const { workflow, tokens } = await saveOk(f, {
      wf_params: { name: 'Counter' },
      step_params: [
        { key: 'seen', type: 'transform', config: { expression: 'state' } },
        { key: 'bump', type: 'set_state', config: { value: "{'n': ($exists(state.n) ? state.n : 0) + 1, 'by': payload.who}" } },
        { key: 'after', type: 'transform', config: { expression: 'state' } },
      ],
    });
    assert.equal(await stateOf(workflow.id), undefined, 'no state before the first set_state');
    const one = await deliverTo(tokens.hook!, { who: 'a' });
    assert.deepEqual(
      one.steps.map((s: any) => s.output),
      [null, { n: 1, by: 'a' }, { n: 1, by: 'a' }],
    );
    const two = await deliverTo(tokens.hook!, { who: 'b' });
    assert.deepEqual(
      two.steps.map((s: any) => s.output),
      [
        { n: 1, by: 'a' },
        { n: 2, by: 'b' },
        { n: 2, by: 'b' },
      ],
    );
    assert.deepEqual(await stateOf(workflow.id), { n: 2, by: 'b' });

    // A test run reads the state, and writes none.
    const t = await f.api.post(`${API}/workflows/${workflow.id}/test_run`, { data: { type: 'workflow_test_run', attributes: { payload: { who: 'test' } } } });
    assert.equal(t.status, 200, t.text);
    const [seen, bump, later] = t.body.data.attributes.steps;
    assert.deepEqual(seen.output, { n: 2, by: 'b' });
    assert.deepEqual(bump.state, { n: 3, by: 'test' });
    assert.match(bump.note, /^Not written \(a test run\): would set the state to \{"n":3,"by":"test"\}/);
    assert.deepEqual(later.output, { n: 3, by: 'test' }, 'the later steps of a test run see the would-be state');
    assert.deepEqual(await stateOf(workflow.id), { n: 2, by: 'b' }, 'a test run wrote nothing');

    // Deleting the workflow deletes its state.
    const states = async () => (await f.t.deps.db.selectFrom('workflow_state').select('id').where('workflow_id', '=', workflow.id).execute()).length;
    assert.equal(await states(), 1);
    assert.equal((await f.api.request('DELETE', `${API}/workflows/${workflow.id}`)).status, 204);
    assert.equal(await states(), 0);
  });

  it('a state over its cap fails the step for good, and the state stays as it was', async () => {
    const { workflow, tokens } = await saveOk(f, {
      wf_params: { name: 'Too big' },
      step_params: [{ key: 'remember', type: 'set_state', config: { value: "payload.big ? {'pad': $pad('', payload.size, 'x')} : {'small': true}" } }],
    });
    assert.equal((await deliverTo(tokens.hook!, { big: false })).outcome, 'completed');
    const r = await deliverTo(tokens.hook!, { big: true, size: STATE_MAX_BYTES });
    assert.equal(r.outcome, 'failed');
    assert.equal(r.attempt, 1, 'not retried');
    assert.match(r.error, /^Step remember failed: The state would be 65546 bytes as JSON; a workflow's state is at most 65536 bytes/);
    assert.deepEqual(await stateOf(workflow.id), { small: true });
    // Just under the cap is kept.
    assert.equal((await deliverTo(tokens.hook!, { big: true, size: STATE_MAX_BYTES - 12 })).outcome, 'completed');
    assert.equal(((await stateOf(workflow.id)) as { pad: string }).pad.length, STATE_MAX_BYTES - 12);
  });

  it("with state_key, each key keeps its own document and a run sees only its key's", async () => {
    const { workflow, tokens } = await saveOk(f, {
      wf_params: { name: 'Per customer', state_key: 'payload.customer' },
      step_params: [
        { key: 'seen', type: 'transform', config: { expression: 'state' } },
        { key: 'bump', type: 'set_state', config: { value: "{'n': ($exists(state.n) ? state.n : 0) + 1, 'customer': payload.customer}" } },
      ],
    });
    assert.equal(workflow.attributes.state_key, 'payload.customer');
    // The file (`workflow get --yaml`) has it as its top-level state_key:, and reads it back.
    const file = workflowOfResource(workflow.attributes);
    const doc = workflowFileDocument(file, undefined);
    assert.equal(doc.state_key, 'payload.customer');
    assert.equal(builderParts(parseWorkflowText(renderYaml(doc)).file).wf_params.state_key, 'payload.customer');
    const a1 = await deliverTo(tokens.hook!, { customer: 'cus_a' });
    const a2 = await deliverTo(tokens.hook!, { customer: 'cus_a' });
    const b1 = await deliverTo(tokens.hook!, { customer: 'cus_b' });
    assert.deepEqual(
      [a1, a2, b1].map((r) => [r.state_key, r.steps[0].output, r.steps[1].output]),
      [
        ['cus_a', null, { n: 1, customer: 'cus_a' }],
        ['cus_a', { n: 1, customer: 'cus_a' }, { n: 2, customer: 'cus_a' }],
        ['cus_b', null, { n: 1, customer: 'cus_b' }],
      ],
      "cus_b's first run does not see cus_a's document",
    );
    // No key in the payload: the unkeyed document, as a workflow without state_key has.
    const none = await deliverTo(tokens.hook!, {});
    assert.equal(none.state_key, '');
    assert.deepEqual(none.steps[0].output, null);

    const list = await f.api.get(`${API}/workflow_states?filter[workflow_id]=${workflow.id}&sort=inserted_at`);
    assert.equal(list.status, 200, list.text);
    assert.deepEqual(
      list.body.data.map((d: any) => [d.attributes.key, d.attributes.value.n]),
      [
        ['cus_a', 2],
        ['cus_b', 1],
        ['', 1],
      ],
    );
    const onlyA = await f.api.get(`${API}/workflow_states?filter[workflow_id]=${workflow.id}&filter[key]=cus_a`);
    assert.deepEqual(
      onlyA.body.data.map((d: any) => d.attributes.value),
      [{ n: 2, customer: 'cus_a' }],
    );
    // A replay keeps its original's key (it is the same delivery).
    const original = await f.api.get(`${API}/workflow_runs?filter[workflow_id]=${workflow.id}&filter[state_key]=cus_a&sort=inserted_at`);
    const replay = await f.api.post(`${API}/workflow_runs/${original.body.data[0].id}/replay`, undefined);
    assert.equal(replay.status, 201, replay.text);
    const run = await waitForRun(f, replay.body.data.id);
    assert.equal(run.attributes.state_key, 'cus_a');
    assert.deepEqual(run.attributes.steps[0].output, { n: 2, customer: 'cus_a' });
    const runs = await f.api.get(`${API}/workflow_runs?filter[workflow_id]=${workflow.id}&filter[state_key]=cus_b`);
    assert.equal(runs.body.data.length, 1);
  });

  it('another workspace does not see the state', async () => {
    const other = await startFlowless();
    const r = await other.get(`${API}/workflow_states`);
    assert.equal(r.status, 200, r.text);
    assert.equal(r.body.data.length, 0);
  });
});

async function startFlowless() {
  const { seedTenant, tokenFor, jsonApi } = await import('../helpers/app.ts');
  const tenant = await seedTenant(f.t.deps);
  return jsonApi(f.t, await tokenFor(f.t, tenant));
}
