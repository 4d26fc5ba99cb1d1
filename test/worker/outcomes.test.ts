/**
 * A run says how it ended: `completed`, `stopped_at_condition`, `failed` or `dead_letter`,
 * with each step's status, a skipped step's reason, a condition's value, and the facts it
 * wrote (a retried write_fact stores nothing twice and counts nothing twice). The lists
 * filter on outcome and facts_written; every failed attempt is one warn line that names
 * the run and the step but holds no payload value or secret.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { sql } from 'kysely';
import { capturedLog } from '../helpers/log-capture.ts';
import { API, createModel, deliver, saveOk, startFlow, waitForRun, type Flow } from '../webhooks/helpers.ts';
import { mockProvider } from '../connectors/mock-provider.ts';

const { log, lines } = capturedLog();

const f: Flow = await startFlow({ ALLOW_PRIVATE_EGRESS: 'true', RUN_MAX_ATTEMPTS: '2', RUN_RETRY_SCHEDULE: '20ms' }, { worker: true, log });
const mock = await mockProvider();
after(() => mock.close());
await createModel(f, 'orders', [
  { name: 'order_id', type: 'string' },
  { name: 'amount', type: 'float', is_required: true },
]);
const KEY = `key_${'k'.repeat(40)}`;
const connector = await f.api.post(`${API}/external_connectors`, {
  data: {
    type: 'external_connector',
    attributes: { name: 'Orders', direction: 'outbound', provider_slug: 'tributary-orders', secret: KEY, config: { base_url: `${mock.url}/v1` } },
  },
});
assert.equal(connector.status, 201, connector.text);
const connectorId: string = connector.body.data.id;

/** A value only the payloads hold: no log line may show it. */
const MARKER = 'payload-marker-7f3a9c';

const store = { key: 'store', type: 'write_fact', config: { data_model_slug: 'orders', mapping: { order_id: 'payload.id', amount: 'payload.amount' } } };
const call = {
  key: 'call',
  type: 'http_request',
  config: { connector_id: connectorId, operation_ref: 'createOrder', body: '{"customer_id": payload.id, "items": []}' },
};

async function runWith(steps: unknown[], payload: unknown): Promise<any> {
  const { tokens } = await saveOk(f, { step_params: steps });
  const d = await deliver(f, `/api/v1/webhooks/${tokens.hook}`, JSON.stringify(payload));
  assert.equal(d.status, 202, d.text);
  const run = await waitForRun(f, d.body.workflow_run_id);
  return { id: run.id, ...run.attributes };
}

const factsOf = async (orderId: string) =>
  Number((await sql<{ n: string }>`select count(*) as n from facts where data->>'order_id' = ${orderId}`.execute(f.t.deps.db)).rows[0]!.n);

const runs: Record<string, any> = {};

describe('outcomes', () => {
  it('completed: every step ran; the facts written are counted', async () => {
    const run = await runWith([{ key: 'shape', type: 'transform', config: { expression: 'payload.amount * 2' } }, store], {
      id: 'o-1',
      amount: 5,
      note: MARKER,
    });
    runs.completed = run;
    assert.equal(run.status, 'succeeded');
    assert.equal(run.outcome, 'completed');
    assert.equal(run.facts_written, 1);
    assert.deepEqual(
      run.steps.map((s: any) => [s.key, s.status]),
      [
        ['shape', 'succeeded'],
        ['store', 'succeeded'],
      ],
    );
    assert.equal(await factsOf('o-1'), 1);
  });

  it("stopped_at_condition: the condition's value before truthiness, the rest skipped with the reason", async () => {
    const run = await runWith([{ key: 'gate', type: 'condition', config: { expression: 'payload.count' } }, store], { id: 'o-2', amount: 1, count: 0 });
    runs.stopped = run;
    assert.equal(run.status, 'succeeded');
    assert.equal(run.outcome, 'stopped_at_condition');
    assert.equal(run.facts_written, 0);
    assert.equal(run.steps[0].status, 'succeeded');
    assert.equal(run.steps[0].value, 0);
    assert.equal(run.steps[0].output, false);
    assert.equal(run.steps[1].status, 'skipped');
    assert.equal(run.steps[1].reason, 'condition false at step gate');
    assert.equal(await factsOf('o-2'), 0);
    // A true condition keeps its value too, and what it gave is not what it passes on.
    const open = await runWith([{ key: 'gate', type: 'condition', config: { expression: 'payload.tags' } }], { id: 'o-2b', tags: ['a'] });
    assert.equal(open.outcome, 'completed');
    assert.deepEqual(open.steps[0].value, ['a']);
    assert.equal(open.steps[0].output, true);
  });

  it('failed: a required field whose expression gave nothing fails the step, naming the field and the expression', async () => {
    const run = await runWith([store, { key: 'after', type: 'transform', config: { expression: '1' } }], { id: 'o-3', note: MARKER });
    runs.failed = run;
    assert.equal(run.status, 'failed');
    assert.equal(run.outcome, 'failed');
    assert.equal(run.attempt, 1, 'a permanent failure is not retried');
    assert.equal(run.facts_written, 0);
    assert.equal(run.steps[0].error, 'mapping.amount: the expression "payload.amount" gave nothing, and the data model orders requires amount');
    assert.equal(run.error, `Step store failed: ${run.steps[0].error}`);
    assert.equal(run.steps[1].status, 'skipped');
    assert.equal(run.steps[1].reason, 'step store failed');
    // Under for_each, the item is named.
    const each = await runWith(
      [
        {
          key: 'lines',
          type: 'write_fact',
          config: { data_model_slug: 'orders', for_each: 'payload.lines', mapping: { order_id: 'item.id', amount: 'item.amount' } },
        },
      ],
      { lines: [{ id: 'o-3a', amount: 1 }, { id: 'o-3b' }] },
    );
    assert.equal(each.outcome, 'failed');
    assert.equal(each.steps[0].error, 'mapping.amount (item 1): the expression "item.amount" gave nothing, and the data model orders requires amount');
    assert.equal(await factsOf('o-3a'), 0, 'all or nothing: no item is stored');
  });

  it('dead_letter: a transient failure on the last attempt; the facts written before it are stored and counted once', async () => {
    mock.script('/v1/orders', { status: 503 }, { status: 503 });
    const run = await runWith([store, call], { id: 'o-4', amount: 7, note: MARKER });
    runs.dead = run;
    assert.equal(run.status, 'failed');
    assert.equal(run.outcome, 'dead_letter');
    assert.equal(run.attempt, 2);
    assert.equal(run.facts_written, 1, 'counted once');
    assert.equal(await factsOf('o-4'), 1, 'stored once');
    assert.equal(run.steps[0].status, 'succeeded');
    // The second attempt resumed after the checkpointed write_fact (docs/workflows.md, "Durable steps"): its record is the first attempt's.
    assert.equal(run.steps[0].output.duplicates, 0);
    assert.equal(run.steps[0].attempt, 1);
    assert.equal(run.steps[1].status, 'failed');
    assert.equal(run.steps[1].attempts, 2);
    assert.equal(run.steps[1].error, 'The provider answered 503');
  });

  it('failures that quote data keep the quote in the record, not in the log', async () => {
    const boom = await runWith([{ key: 'boom', type: 'transform', config: { expression: '$error("bad note " & payload.note)' } }], { note: MARKER });
    runs.boom = boom;
    assert.equal(boom.outcome, 'failed');
    assert.match(boom.steps[0].error, new RegExp(`^The expression failed: .*bad note ${MARKER}`));
    mock.script('/v1/orders', { status: 422, body: { error: `unknown customer ${MARKER}` } });
    const refused = await runWith([call], { id: MARKER });
    runs.refused = refused;
    assert.equal(refused.outcome, 'failed');
    assert.match(refused.steps[0].error, new RegExp(`The provider answered 422: .*unknown customer ${MARKER}`));
  });

  it('a provider that recovers within the attempts: completed, its one fact counted once', async () => {
    mock.script('/v1/orders', { status: 503 }, { status: 201, body: { id: 'ord_abcdefgh', status: 'open' } });
    const run = await runWith([store, call], { id: 'o-5', amount: 2 });
    assert.equal(run.outcome, 'completed');
    assert.equal(run.attempt, 2);
    assert.equal(run.facts_written, 1);
    assert.equal(await factsOf('o-5'), 1);
  });
});

describe('lists', () => {
  const ids = async (query: string) => {
    const r = await f.api.get(`${API}/workflow_runs?${query}&page[limit]=250`);
    assert.equal(r.status, 200, r.text);
    return new Set<string>(r.body.data.map((x: any) => x.id));
  };

  it('filter[outcome] and filter[facts_written] on the JSON:API list', async () => {
    const stopped = await ids('filter[outcome]=stopped_at_condition');
    assert.ok(stopped.has(runs.stopped.id));
    assert.ok(!stopped.has(runs.completed.id) && !stopped.has(runs.failed.id) && !stopped.has(runs.dead.id));
    const dead = await ids('filter[outcome]=dead_letter');
    assert.deepEqual([...dead], [runs.dead.id]);
    const none = await ids('filter[facts_written]=0');
    assert.ok(none.has(runs.stopped.id) && none.has(runs.failed.id));
    assert.ok(!none.has(runs.completed.id) && !none.has(runs.dead.id));
    const bad = await f.api.get(`${API}/workflow_runs?filter[outcome]=lost`);
    assert.equal(bad.status, 400, bad.text);
  });

  it('the admin list takes outcome', async () => {
    const get = (q: string) => fetch(`${f.t.url}/admin/v1/runs?${q}`, { headers: { authorization: `Bearer ${f.t.adminToken}` } });
    const r = await get('outcome=dead_letter');
    assert.equal(r.status, 200);
    const page = (await r.json()) as { data: Array<{ id: string; outcome: string; facts_written: number }> };
    assert.deepEqual(
      page.data.map((x) => [x.id, x.outcome, x.facts_written]),
      [[runs.dead.id, 'dead_letter', 1]],
    );
    const bad = await get('outcome=lost');
    assert.equal(bad.status, 400);
    assert.match(await bad.text(), /outcome must be one of completed, stopped_at_condition, failed, dead_letter/);
  });
});

describe('warn lines', () => {
  const entries = () => lines.map((l) => JSON.parse(l) as Record<string, any>);

  it('one per failed, retried or dead-lettered attempt, with the run, step, attempt and code', () => {
    const of = (id: string) => entries().filter((e) => e.run === id && e.level === 40);
    const [retried, dead] = of(runs.dead.id);
    assert.equal(of(runs.dead.id).length, 2, JSON.stringify(of(runs.dead.id)));
    assert.equal(retried!.msg, 'workflow run attempt failed; retrying');
    assert.equal(retried!.workflow, runs.dead.workflow_id);
    assert.equal(retried!.step, 'call');
    assert.equal(retried!.attempt, 1);
    assert.equal(retried!.max_attempts, 2);
    assert.equal(retried!.code, 'transient');
    assert.equal(retried!.status, 503);
    assert.equal(retried!.error, 'The provider answered 503');
    assert.ok(!Number.isNaN(Date.parse(retried!.next_attempt_at)));
    assert.equal(dead!.msg, 'workflow run dead-lettered: a transient failure on its last attempt');
    assert.equal(dead!.outcome, 'dead_letter');
    assert.equal(dead!.attempt, 2);
    assert.equal(dead!.next_attempt_at, undefined);
    const [failed] = of(runs.failed.id);
    assert.equal(of(runs.failed.id).length, 1);
    assert.equal(failed!.msg, 'workflow run failed');
    assert.equal(failed!.code, 'permanent');
    assert.equal(failed!.step, 'store');
    assert.equal(failed!.error, 'mapping.amount', 'the text up to its first colon');
    assert.equal(failed!.err, undefined, 'a failure of ours has no stack to show');
    const [boom] = of(runs.boom.id);
    assert.equal(boom!.error, 'The expression failed');
    const [refused] = of(runs.refused.id);
    assert.equal(refused!.error, 'The provider answered 422');
    assert.equal(refused!.status, 422);
    // Runs that did not fail log nothing at warn.
    assert.deepEqual(of(runs.completed.id), []);
    assert.deepEqual(of(runs.stopped.id), []);
  });

  it('holds no payload value, secret or bearer token', () => {
    assert.ok(lines.length > 0);
    for (const l of lines) {
      assert.ok(!l.includes(MARKER), `payload logged: ${l}`);
      assert.ok(!l.includes(KEY) && !l.includes(KEY.slice(4)), `connector secret logged: ${l}`);
      assert.ok(!l.includes(f.bearer), `bearer logged: ${l}`);
    }
  });
});
