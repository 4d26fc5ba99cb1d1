/**
 * The save-time check of `steps.<key>`: an expression may read only the steps before its
 * own. A missing step, the step itself or a later one is a 422 pointing at the expression
 * (transform, condition, write_fact mapping/for_each/data/observed_at, http_request
 * params/query/headers/body); references are found in JSONata's syntax tree, so a string
 * or a payload field named `steps` is no reference.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { assertJsonApiError } from '../helpers/app.ts';
import { createModel, save, startFlow, type Flow } from '../webhooks/helpers.ts';
import { stepRefs } from '../../src/workflows/step-refs.ts';

const f: Flow = await startFlow({}, {});
await createModel(f, 'orders', [
  { name: 'order_id', type: 'string' },
  { name: 'status', type: 'string' },
]);

const transform = (key: string, expression: string) => ({ key, type: 'transform', config: { expression } });
const at = (i: number, member: string) => ({ pointer: `/data/attributes/step_params/${i}/config/${member}` });

async function refused(steps: unknown[], i: number, member: string, detail: RegExp): Promise<void> {
  const r = await save(f, { step_params: steps });
  assertJsonApiError(r, 422, 'invalid_request', at(i, member));
  assert.match(r.body.errors[0].detail, detail);
}

describe('steps.<key> at save', () => {
  it('refuses a step that does not exist, naming the steps before it', async () => {
    await refused(
      [transform('a', 'payload'), transform('b', 'payload'), { key: 'ok', type: 'condition', config: { expression: 'steps.shape.amount > 0' } }],
      2,
      'expression',
      /^steps\.shape \(at character \d+\) is not a step before this one; steps before it: a, b$/,
    );
    await refused([transform('a', '$.steps.nope')], 0, 'expression', /steps\.nope .*no step comes before it/);
  });

  it('refuses the same step and a later one', async () => {
    await refused([transform('a', 'steps.a.x')], 0, 'expression', /steps\.a .*\(it is this step\)/);
    await refused([transform('a', '$sum(steps.b.x)'), transform('b', '1')], 0, 'expression', /steps\.b .*\(it comes later\); no step comes before it/);
  });

  it('points into write_fact mapping, for_each, data and observed_at', async () => {
    const wf = (config: Record<string, unknown>) => [transform('a', '1'), { key: 'w', type: 'write_fact', config: { data_model_slug: 'orders', ...config } }];
    await refused(wf({ mapping: { order_id: 'steps.a', status: 'steps.later.s' } }), 1, 'mapping/status', /steps\.later/);
    await refused(wf({ for_each: 'steps.w', mapping: { order_id: 'item' } }), 1, 'for_each', /this step/);
    await refused(wf({ data: '{"order_id": steps.x}' }), 1, 'data', /steps\.x/);
    await refused(wf({ data: 'steps.a', observed_at: '$$.steps.z' }), 1, 'observed_at', /steps\.z/);
  });

  it('points into http_request params, query, headers and body', async () => {
    const c = await f.api.post('/api/json/v1/external_connectors', {
      data: { type: 'external_connector', attributes: { name: 'X', direction: 'outbound', auth_type: 'none', config: { base_url: 'https://x.example.com' } } },
    });
    assert.equal(c.status, 201, c.text);
    const call = (config: Record<string, unknown>) => [
      transform('a', '1'),
      { key: 'h', type: 'http_request', config: { connector_id: c.body.data.id, method: 'POST', path: '/x', ...config } },
    ];
    await refused(call({ path: '/x/{id}', params: { id: 'steps.q' } }), 1, 'params/id', /steps\.q/);
    await refused(call({ query: { 'a/b': 'steps.q' } }), 1, 'query/a~1b', /steps\.q/);
    await refused(call({ headers: { 'X-A': 'steps.h' } }), 1, 'headers/X-A', /this step/);
    await refused(call({ body: '{"a": steps.a, "z": steps.zz}' }), 1, 'body', /steps\.zz/);
    const ok = await save(f, { step_params: call({ body: '{"a": steps.a}', headers: { 'X-A': '$string(steps.a)' } }) });
    assert.equal(ok.status, 201, ok.text);
  });

  it('saves a workflow that reads earlier steps only', async () => {
    const r = await save(f, {
      step_params: [
        transform('shape', '{"amount": payload.amount, "steps": payload.steps}'),
        { key: 'ok', type: 'condition', config: { expression: 'steps.shape.amount > 0 and $.steps.shape.amount < 10' } },
        {
          key: 'w',
          type: 'write_fact',
          config: { data_model_slug: 'orders', for_each: 'payload.items', mapping: { order_id: 'item.id & steps.shape.amount', status: '"steps.nope"' } },
        },
        // `steps` inside a path's later step or predicate is a field of the current item, not the run's steps.
        transform('t', 'payload.items.steps.nope & payload.items[steps.nope = 1].id & steps.w.items'),
        // The delivery is no step: `delivery.*` is read freely, even a header named "steps".
        transform('d', '{"event": delivery.headers."x-github-event", "id": delivery.id, "s": delivery.headers.steps, "x": $$.delivery.headers}'),
      ],
    });
    assert.equal(r.status, 201, r.text);
  });
});

describe('stepRefs', () => {
  it('finds paths that start at the run context, not fields of an item or text', () => {
    const keys = (e: string) => stepRefs(e).map((r) => r.key);
    assert.deepEqual(keys('steps.a.b + $.steps.c + $$.steps.d'), ['a', 'c', 'd']);
    assert.deepEqual(keys('{"x": $sum(steps.e.n)}'), ['e']);
    assert.deepEqual(keys('$map(payload, function($v) { steps.f })'), ['f']);
    assert.deepEqual(keys('payload.items.($$.steps.g)'), ['g']);
    assert.deepEqual(keys('payload.steps.h & "steps.i" & payload[steps.j].x & steps & steps[0].k'), []);
  });
});
