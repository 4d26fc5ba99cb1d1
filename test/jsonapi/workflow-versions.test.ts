/**
 * workflow_version: the steps of every saved version of a workflow, read-only, listed and
 * read like any type (filter, sort, fields, include), seen only in the caller's workspace.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { assertJsonApiError, jsonApi, seedTenant, tokenFor } from '../helpers/app.ts';
import { API, saveOk, startFlow, type Flow } from '../webhooks/helpers.ts';

const f: Flow = await startFlow({}, { worker: false });
const V1 = [{ key: 'one', type: 'transform', config: { expression: '"v1"' } }];
const V2 = [
  { key: 'one', type: 'transform', config: { expression: '"v2"' } },
  { key: 'two', type: 'transform', config: { expression: 'steps.one' } },
];

async function twoVersions() {
  const v1 = await saveOk(f, { step_params: V1 });
  const v2 = await saveOk(f, {
    workflow_id: v1.workflow.id,
    lock_version: v1.workflow.attributes.lock_version,
    is_new_version: true,
    step_params: V2,
    trigger_params: v1.workflow.attributes.triggers,
  });
  assert.equal(v2.workflow.attributes.version, 2);
  return v1.workflow.id as string;
}

const stepKeys = (v: any) => v.attributes.steps.map((s: { key: string }) => s.key);

describe('workflow_version', () => {
  it('lists the versions of a workflow, newest first, with their steps and saver', async () => {
    const workflowId = await twoVersions();
    await twoVersions(); // another workflow's versions stay out of the filter
    const r = await f.api.get(`${API}/workflow_versions?filter[workflow_id]=${workflowId}&sort=-version`);
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(
      r.body.data.map((v: any) => [v.type, v.attributes.version, stepKeys(v)]),
      [
        ['workflow_version', 2, ['one', 'two']],
        ['workflow_version', 1, ['one']],
      ],
    );
    for (const v of r.body.data) {
      assert.equal(v.attributes.workflow_id, workflowId);
      assert.equal(v.attributes.saved_by, f.tenant.membershipId);
      assert.ok(!Number.isNaN(Date.parse(v.attributes.inserted_at)));
      assert.deepEqual(v.relationships.workflow.data, { type: 'workflow', id: workflowId });
    }
    assert.equal(r.body.data[1].attributes.steps[0].config.expression, '"v1"');

    // One version by id, with its workflow; a sparse fieldset; a filter on the version.
    const one = await f.api.get(`${API}/workflow_versions/${r.body.data[1].id}?include=workflow`);
    assert.equal(one.status, 200, one.text);
    assert.equal(one.body.data.attributes.version, 1);
    assert.equal(one.body.included[0].id, workflowId);
    const sparse = await f.api.get(`${API}/workflow_versions?filter[workflow_id]=${workflowId}&filter[version]=2&fields[workflow_version]=version`);
    assert.deepEqual(
      sparse.body.data.map((v: any) => v.attributes),
      [{ version: 2 }],
    );
  });

  it('is read-only, and a bad filter is a 400', async () => {
    const created = await f.api.post(`${API}/workflow_versions`, { data: { type: 'workflow_version', attributes: { version: 9 } } });
    assertJsonApiError(created, 405, 'method_not_allowed');
    assertJsonApiError(await f.api.get(`${API}/workflow_versions?filter[steps]=x`), 400, 'invalid_query');
  });

  it("is seen only in the workflow's workspace: another's is 404, and its list is empty", async () => {
    const workflowId = await twoVersions();
    const mine = await f.api.get(`${API}/workflow_versions?filter[workflow_id]=${workflowId}`);
    const stranger = await seedTenant(f.t.deps);
    const theirs = jsonApi(f.t, await tokenFor(f.t, stranger));
    assertJsonApiError(await theirs.get(`${API}/workflow_versions/${mine.body.data[0].id}`), 404, 'not_found');
    const list = await theirs.get(`${API}/workflow_versions?filter[workflow_id]=${workflowId}`);
    assert.equal(list.status, 200, list.text);
    assert.deepEqual(list.body.data, []);
    assertJsonApiError(await theirs.get(`${API}/workflows/${workflowId}`), 404, 'not_found');
  });
});
