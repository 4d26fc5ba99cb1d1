/**
 * Workflows: save_builder_state (the whole graph in one transaction; trigger tokens shown
 * once; lock_version; versions; validation with pointers) and the reads of workflows and
 * runs through the JSON:API core.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import * as admin from '../../src/admin/service.ts';
import { assertJsonApiError, jsonApi, seedAccount, seedTenant, tokenFor } from '../helpers/app.ts';
import { runs } from '../helpers/property.ts';
import { API, builderState, createModel, deliver, save, saveOk, startFlow, waitForRun, type Flow } from '../webhooks/helpers.ts';

const f: Flow = await startFlow();
await createModel(f, 'orders', [
  { name: 'order_id', type: 'string' },
  { name: 'amount', type: 'float' },
]);
const STEP = { key: 'shape', type: 'transform', config: { expression: 'payload' } };
const WRITE = { key: 'store', type: 'write_fact', config: { data_model_slug: 'orders', mapping: { order_id: 'payload.id', amount: 'payload.amount' } } };
const SAVE = `${API}/workflows/save_builder_state`;

describe('who may', () => {
  it('401 without a token; 403 without api_write to save or replay, without api_read to read', async () => {
    const anon = jsonApi(f.t, undefined);
    assert.equal((await anon.post(SAVE, builderState(f, { step_params: [STEP] }))).status, 401);
    assert.equal((await anon.get(`${API}/workflows`)).status, 401);
    assert.equal((await anon.get(`${API}/workflow_runs`)).status, 401);
    const reader = jsonApi(f.t, await tokenFor(f.t, f.tenant, 'api_read'));
    assertJsonApiError(await reader.post(SAVE, builderState(f, { step_params: [STEP] })), 403, 'forbidden');
    const writer = jsonApi(f.t, await tokenFor(f.t, f.tenant, 'api_write'));
    assertJsonApiError(await writer.get(`${API}/workflows`), 403, 'forbidden');
    assertJsonApiError(await writer.get(`${API}/workflow_runs`), 403, 'forbidden');
  });

  it("another tenant's workflow and run are 404: read, save over, replay", async () => {
    const { workflow, tokens } = await saveOk(f, { step_params: [STEP] });
    const d = await deliver(f, `/api/v1/webhooks/${tokens.hook}`, '{}');
    await waitForRun(f, d.body.workflow_run_id);
    const stranger = await seedTenant(f.t.deps);
    const other = jsonApi(f.t, await tokenFor(f.t, stranger));
    assertJsonApiError(await other.get(`${API}/workflows/${workflow.id}`), 404, 'not_found');
    assertJsonApiError(await other.get(`${API}/workflow_runs/${d.body.workflow_run_id}`), 404, 'not_found');
    assertJsonApiError(await other.post(`${API}/workflow_runs/${d.body.workflow_run_id}/replay`, undefined), 404, 'not_found');
    const over = await other.post(SAVE, {
      data: {
        type: 'workflow_builder_state',
        attributes: {
          is_new_version: false,
          organization_id: stranger.organizationId,
          workflow_id: workflow.id,
          wf_params: { name: 'x' },
          step_params: [],
          trigger_params: [],
        },
      },
    });
    assertJsonApiError(over, 404, 'not_found');
    assert.deepEqual((await other.get(`${API}/workflows`)).body.data, []);
  });
});

describe('save', () => {
  it('answers 201 with the workflow and the new trigger tokens, once', async () => {
    const r = await save(f, { wf_params: { name: 'Orders in', description: 'from the shop', is_active: true }, step_params: [STEP, WRITE] });
    assert.equal(r.status, 201, r.text);
    const a = r.body.data.attributes;
    assert.equal(r.body.data.type, 'workflow');
    assert.equal(r.headers.get('location'), `${API}/workflows/${r.body.data.id}`);
    assert.deepEqual(Object.keys(a).sort(), [
      'concurrency',
      'description',
      'inserted_at',
      'is_active',
      'lock_version',
      'name',
      'on_failure',
      'organization_id',
      'state_key',
      'steps',
      'triggers',
      'updated_at',
      'version',
    ]);
    assert.equal(a.name, 'Orders in');
    assert.equal(a.version, 1);
    assert.deepEqual(a.steps, [STEP, WRITE]);
    assert.deepEqual(Object.keys(r.body.meta.trigger_tokens), ['hook']);
    assert.deepEqual(a.triggers, [
      { id: a.triggers[0].id, key: 'hook', type: 'webhook', service_account_id: f.tenant.credentialId, inbound_connector_id: null, accept: 'json' },
    ]);
    const read = await f.api.get(`${API}/workflows/${r.body.data.id}`);
    assert.ok(!read.text.includes(r.body.meta.trigger_tokens.hook));
    assert.equal(read.body.meta, undefined);
  });

  it('keeps the token of a trigger sent with its id; a new trigger gets one; a left-out trigger stops answering', async () => {
    const first = await saveOk(f, {
      step_params: [STEP],
      trigger_params: [
        { key: 'a', type: 'webhook', service_account_id: f.tenant.credentialId },
        { key: 'b', type: 'webhook', service_account_id: f.tenant.credentialId },
      ],
    });
    const [a, b] = first.workflow.attributes.triggers;
    const second = await saveOk(f, {
      workflow_id: first.workflow.id,
      step_params: [STEP],
      trigger_params: [
        { ...a, key: 'a_renamed' },
        { key: 'c', type: 'webhook', service_account_id: f.tenant.credentialId },
      ],
    });
    assert.deepEqual(Object.keys(second.tokens), ['c']);
    assert.equal((await deliver(f, `/api/v1/webhooks/${first.tokens.a}`, '{}')).status, 202);
    assert.equal((await deliver(f, `/api/v1/webhooks/${second.tokens.c}`, '{}')).status, 202);
    const gone = await deliver(f, `/api/v1/webhooks/${first.tokens.b}`, '{}');
    assert.equal(gone.status, 404);
    assert.deepEqual(gone.body, { error: 'Trigger not found' });
    assert.deepEqual(
      second.workflow.attributes.triggers.map((t: any) => t.key),
      ['a_renamed', 'c'],
    );
    assert.equal(second.workflow.attributes.triggers[0].id, a.id);
    assert.notEqual(b.id, second.workflow.attributes.triggers[1].id);
  });

  it('keys may swap between kept triggers', async () => {
    const first = await saveOk(f, {
      step_params: [STEP],
      trigger_params: [
        { key: 'x', type: 'webhook', service_account_id: f.tenant.credentialId },
        { key: 'y', type: 'webhook', service_account_id: f.tenant.credentialId },
      ],
    });
    const [x, y] = first.workflow.attributes.triggers;
    const swapped = await saveOk(f, {
      workflow_id: first.workflow.id,
      step_params: [STEP],
      trigger_params: [
        { ...x, key: 'y' },
        { ...y, key: 'x' },
      ],
    });
    assert.deepEqual(
      swapped.workflow.attributes.triggers.map((t: any) => [t.id, t.key]),
      [
        [x.id, 'y'],
        [y.id, 'x'],
      ],
    );
  });
});

describe('lock_version', () => {
  it('stays when nothing changed, moves on any change, and never comes back after A->B->A', async () => {
    const { workflow } = await saveOk(f, { step_params: [STEP] });
    const triggers = workflow.attributes.triggers;
    const l1 = workflow.attributes.lock_version;
    const same = await saveOk(f, { workflow_id: workflow.id, lock_version: l1, step_params: [STEP], trigger_params: triggers });
    assert.equal(same.workflow.attributes.lock_version, l1);
    assert.equal(same.workflow.attributes.updated_at, workflow.attributes.updated_at);
    const b = await saveOk(f, { workflow_id: workflow.id, lock_version: l1, step_params: [STEP, WRITE], trigger_params: triggers });
    const l2 = b.workflow.attributes.lock_version;
    assert.notEqual(l2, l1);
    const back = await saveOk(f, { workflow_id: workflow.id, lock_version: l2, step_params: [STEP], trigger_params: triggers });
    assert.notEqual(back.workflow.attributes.lock_version, l1);
    assert.notEqual(back.workflow.attributes.lock_version, l2);
  });

  it('a stale one is 409 stale_lock_version; omitted, the last writer wins', async () => {
    const { workflow } = await saveOk(f, { step_params: [STEP] });
    const triggers = workflow.attributes.triggers;
    const l1 = workflow.attributes.lock_version;
    await saveOk(f, { workflow_id: workflow.id, lock_version: l1, step_params: [STEP, WRITE], trigger_params: triggers });
    const stale = await save(f, { workflow_id: workflow.id, lock_version: l1, step_params: [], trigger_params: triggers });
    assertJsonApiError(stale, 409, 'stale_lock_version', { pointer: '/data/attributes/lock_version' });
    const blind = await saveOk(f, { workflow_id: workflow.id, step_params: [], trigger_params: triggers });
    assert.deepEqual(blind.workflow.attributes.steps, []);
  });

  it('a malformed one is 422 at /data/attributes/lock_version, not a conflict', async () => {
    const { workflow } = await saveOk(f, { step_params: [STEP] });
    for (const lock_version of ['garbage', '', `${workflow.attributes.lock_version}x`, '1.5F0C2A9D1E7B3C44']) {
      const res = await save(f, { workflow_id: workflow.id, lock_version, step_params: [STEP], trigger_params: workflow.attributes.triggers });
      assertJsonApiError(res, 422, 'invalid_request', { pointer: '/data/attributes/lock_version' });
    }
  });

  it('of two concurrent saves with the same lock_version, exactly one succeeds', async () => {
    for (let round = 0; round < 5; round++) {
      const { workflow } = await saveOk(f, { step_params: [STEP] });
      const l = workflow.attributes.lock_version;
      const triggers = workflow.attributes.triggers;
      const results = await Promise.all([
        save(f, { workflow_id: workflow.id, lock_version: l, step_params: [STEP, WRITE], trigger_params: triggers }),
        save(f, { workflow_id: workflow.id, lock_version: l, step_params: [], trigger_params: triggers }),
      ]);
      assert.deepEqual(results.map((r) => r.status).sort(), [201, 409], results.map((r) => r.text).join('\n'));
    }
  });
});

describe('versions', () => {
  it('is_new_version bumps version and keeps the old definition for the runs made with it', async () => {
    const v1 = await saveOk(f, { step_params: [{ key: 'old_step', type: 'transform', config: { expression: '"v1"' } }] });
    const d = await deliver(f, `/api/v1/webhooks/${v1.tokens.hook}`, '{}');
    const run1 = await waitForRun(f, d.body.workflow_run_id);
    assert.equal(run1.attributes.workflow_version, 1);
    const v2 = await saveOk(f, {
      workflow_id: v1.workflow.id,
      is_new_version: true,
      step_params: [{ key: 'new_step', type: 'transform', config: { expression: '"v2"' } }],
      trigger_params: v1.workflow.attributes.triggers,
    });
    assert.equal(v2.workflow.attributes.version, 2);
    const replay = await f.api.post(`${API}/workflow_runs/${run1.id}/replay`, undefined);
    assert.equal(replay.status, 201, replay.text);
    const replayed = await waitForRun(f, replay.body.data.id);
    assert.equal(replayed.attributes.workflow_version, 1);
    assert.deepEqual(
      replayed.attributes.steps.map((s: any) => [s.key, s.output]),
      [['old_step', 'v1']],
    );
    const fresh = await waitForRun(f, (await deliver(f, `/api/v1/webhooks/${v1.tokens.hook}`, '{"n":2}')).body.workflow_run_id);
    assert.equal(fresh.attributes.workflow_version, 2);
    assert.deepEqual(
      fresh.attributes.steps.map((s: any) => [s.key, s.output]),
      [['new_step', 'v2']],
    );
  });
});

describe('validation: 422 invalid_request at the input that caused it', () => {
  const at = (i: number, rest: string) => ({ pointer: `/data/attributes/step_params/${i}${rest}` });
  const cases: Array<[string, () => Promise<Parameters<typeof save>[1]>, { pointer: string }, RegExp?]> = [
    [
      'JSONata that does not compile',
      async () => ({
        step_params: [
          STEP,
          STEP && { key: 'b', type: 'transform', config: { expression: '1' } },
          { key: 'c', type: 'transform', config: { expression: 'payload.(' } },
        ],
      }),
      at(2, '/config/expression'),
      /does not compile/,
    ],
    ['a duplicate step key', async () => ({ step_params: [STEP, STEP] }), at(1, '/key'), /used by another step/],
    ['a malformed step key', async () => ({ step_params: [{ ...STEP, key: 'Bad-Key' }] }), at(0, '/key')],
    [
      'an unknown step type',
      async () => ({ step_params: [{ ...STEP, type: 'sleep' }] }),
      at(0, '/type'),
      /one of transform, condition, write_fact, http_request/,
    ],
    [
      'an http_request step whose connector is not one of the workspace',
      async () => ({ step_params: [{ key: 'call', type: 'http_request', config: { connector_id: f.tenant.credentialId, method: 'GET', path: '/' } }] }),
      at(0, '/config/connector_id'),
      /outbound connector of this workspace/,
    ],
    ['an unknown member of a config', async () => ({ step_params: [{ ...STEP, config: { expression: '1', timeout: 5 } }] }), at(0, '/config/timeout')],
    [
      'a data_model_slug not in the workspace',
      async () => ({ step_params: [{ ...WRITE, config: { ...WRITE.config, data_model_slug: 'nope' } }] }),
      at(0, '/config/data_model_slug'),
      /not a data model/,
    ],
    [
      'a mapping field not in the model',
      async () => ({ step_params: [{ ...WRITE, config: { ...WRITE.config, mapping: { colour: '1' } } }] }),
      at(0, '/config/mapping/colour'),
    ],
    ['both mapping and data', async () => ({ step_params: [{ ...WRITE, config: { ...WRITE.config, data: 'payload' } }] }), at(0, '/config'), /exactly one/],
    [
      'an expression over 10,000 characters',
      async () => ({ step_params: [{ ...STEP, config: { expression: `"${'x'.repeat(10_000)}"` } }] }),
      at(0, '/config/expression'),
      /longer than 10000/,
    ],
    [
      'a regex with a nested quantifier',
      async () => ({ step_params: [{ ...STEP, config: { expression: '$match(payload.s, /(a+)+b/)' } }] }),
      at(0, '/config/expression'),
      /nested quantifier/,
    ],
    [
      'a nested quantifier inside bare parentheses',
      async () => ({ step_params: [{ ...STEP, config: { expression: '$match(payload.s, /((a+))+$/)' } }] }),
      at(0, '/config/expression'),
      /nested quantifier/,
    ],
    [
      'a quantified alternation',
      async () => ({ step_params: [{ ...STEP, config: { expression: '$match(payload.s, /^(a|aa)+$/)' } }] }),
      at(0, '/config/expression'),
      /quantified alternation/,
    ],
    [
      'a chain of quantifiers over one atom',
      async () => ({ step_params: [{ ...STEP, config: { expression: '$match(payload.s, /a*a*a*a*b/)' } }] }),
      at(0, '/config/expression'),
      /repeated quantifiers/,
    ],
    [
      'more than 50 steps',
      async () => ({ step_params: Array.from({ length: 51 }, (_, i) => ({ key: `s${i}`, type: 'transform', config: { expression: '1' } })) }),
      { pointer: '/data/attributes/step_params' },
      /at most 50/,
    ],
    [
      'more than 20 triggers',
      async () => ({
        step_params: [],
        trigger_params: Array.from({ length: 21 }, (_, i) => ({ key: `t${i}`, type: 'webhook', service_account_id: f.tenant.credentialId })),
      }),
      { pointer: '/data/attributes/trigger_params' },
      /at most 20/,
    ],
    [
      'an unknown trigger type',
      async () => ({ step_params: [], trigger_params: [{ key: 't', type: 'cron', service_account_id: f.tenant.credentialId }] }),
      { pointer: '/data/attributes/trigger_params/0/type' },
    ],
    [
      'a duplicate trigger key',
      async () => ({
        step_params: [],
        trigger_params: [
          { key: 't', type: 'webhook', service_account_id: f.tenant.credentialId },
          { key: 't', type: 'webhook', service_account_id: f.tenant.credentialId },
        ],
      }),
      { pointer: '/data/attributes/trigger_params/1/key' },
    ],
    [
      'an inactive trigger account',
      async () => {
        const acct = await seedAccount(f.t.deps, f.tenant, { scopes: ['webhooks'] });
        await admin.updateCredential(f.t.deps.db, acct.credentialId, { is_active: false }, new Date());
        return { step_params: [], trigger_params: [{ key: 't', type: 'webhook', service_account_id: acct.credentialId }] };
      },
      { pointer: '/data/attributes/trigger_params/0/service_account_id' },
      /active service account/,
    ],
    [
      'a trigger account of another workspace',
      async () => {
        const stranger = await seedTenant(f.t.deps);
        return { step_params: [], trigger_params: [{ key: 't', type: 'webhook', service_account_id: stranger.credentialId }] };
      },
      { pointer: '/data/attributes/trigger_params/0/service_account_id' },
    ],
    [
      'an outbound connector as inbound_connector_id',
      async () => {
        const c = await f.api.post(`${API}/external_connectors`, {
          data: { type: 'external_connector', attributes: { name: 'out', auth_type: 'none', direction: 'outbound' } },
        });
        return {
          step_params: [],
          trigger_params: [{ key: 't', type: 'webhook', service_account_id: f.tenant.credentialId, inbound_connector_id: c.body.data.id }],
        };
      },
      { pointer: '/data/attributes/trigger_params/0/inbound_connector_id' },
      /inbound connector/,
    ],
    [
      'a trigger id not of this workflow',
      async () => {
        const other = await saveOk(f, { step_params: [] });
        return { step_params: [], trigger_params: [other.workflow.attributes.triggers[0]] };
      },
      { pointer: '/data/attributes/trigger_params/0/id' },
    ],
    [
      "an organization_id that is not the caller's",
      async () => ({ step_params: [], organization_id: (await seedTenant(f.t.deps)).organizationId }) as never,
      { pointer: '/data/attributes/organization_id' },
    ],
    ['wf_params without a name', async () => ({ step_params: [], wf_params: { is_active: true } }), { pointer: '/data/attributes/wf_params/name' }],
  ];
  for (const [name, input, source, detail] of cases) {
    it(name, async () => {
      const r = await save(f, await input());
      assertJsonApiError(r, 422, 'invalid_request', source);
      if (detail) assert.match(r.body.errors[0].detail, detail);
    });
  }

  it('a data.type other than workflow_builder_state is 409 type_mismatch', async () => {
    const doc = builderState(f, { step_params: [] });
    assertJsonApiError(await f.api.post(SAVE, { data: { ...doc.data, type: 'workflow' } }), 409, 'type_mismatch');
  });

  it('a missing required attribute is 422 at its pointer', async () => {
    const doc = builderState(f, { step_params: [] });
    delete (doc.data.attributes as Record<string, unknown>).is_new_version;
    assertJsonApiError(await f.api.post(SAVE, doc), 422, 'invalid_request', { pointer: '/data/attributes/is_new_version' });
  });

  it('property: a step key is accepted exactly when it is a lowercase identifier of at most 63 characters', async () => {
    await fc.assert(
      fc.asyncProperty(fc.oneof(fc.stringMatching(/^[a-z][a-z0-9_]{0,62}$/), fc.string({ maxLength: 70 })), async (key) => {
        const r = await save(f, { step_params: [{ key, type: 'transform', config: { expression: '1' } }], trigger_params: [] });
        if (/^[a-z][a-z0-9_]{0,62}$/.test(key)) assert.equal(r.status, 201, r.text);
        else assertJsonApiError(r, 422, 'invalid_request', { pointer: '/data/attributes/step_params/0/key' });
      }),
      { numRuns: runs(30) },
    );
  });
});

describe('reads', () => {
  it('lists workflows with filters, sort and include=runs; runs with filters and include=workflow', async () => {
    const w = await saveOk(f, { wf_params: { name: 'zz-listed', is_active: false }, step_params: [STEP] });
    const list = await f.api.get(`${API}/workflows?filter[name]=zz-listed&filter[is_active]=false&sort=-version&include=runs`);
    assert.equal(list.status, 200, list.text);
    assert.deepEqual(
      list.body.data.map((x: any) => x.id),
      [w.workflow.id],
    );
    assert.deepEqual(list.body.data[0].relationships.runs.data, []);
    const active = await saveOk(f, { wf_params: { name: 'zz-runs' }, step_params: [STEP] });
    const since = new Date(Date.now() - 1000).toISOString();
    const d = await deliver(f, `/api/v1/webhooks/${active.tokens.hook}`, '{"x":1}');
    await waitForRun(f, d.body.workflow_run_id);
    const runsList = await f.api.get(
      `${API}/workflow_runs?filter[workflow_id]=${active.workflow.id}&filter[status]=succeeded&filter[trigger_key]=hook&filter[inserted_at][gte]=${since}&include=workflow`,
    );
    assert.equal(runsList.status, 200, runsList.text);
    assert.deepEqual(
      runsList.body.data.map((x: any) => x.id),
      [d.body.workflow_run_id],
    );
    assert.equal(runsList.body.included[0].id, active.workflow.id);
    const none = await f.api.get(`${API}/workflow_runs?filter[workflow_id]=${active.workflow.id}&filter[status]=failed`);
    assert.deepEqual(none.body.data, []);
    const bad = await f.api.get(`${API}/workflow_runs?filter[status]=done`);
    assertJsonApiError(bad, 400, 'invalid_query');
    const run = (await f.api.get(`${API}/workflow_runs/${d.body.workflow_run_id}`)).body.data.attributes;
    for (const k of [
      'status',
      'attempt',
      'workflow_id',
      'workflow_version',
      'trigger_key',
      'delivery_id',
      'payload',
      'steps',
      'error',
      'inserted_at',
      'started_at',
      'finished_at',
    ])
      assert.ok(k in run, k);
    assert.ok(!('locked_by' in run) && !('run_at' in run));
  });
});
