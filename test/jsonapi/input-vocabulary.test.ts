/** JSON:API documents and the admin API check values with one vocabulary: same rule, same text. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { AppError } from '../../src/errors.ts';
import * as admin from '../../src/admin/service.ts';
import { readAttributes } from '../../src/http/jsonapi/input.ts';
import { dataModelInput } from '../../src/resources/data_models/service.ts';
import { startApp } from '../helpers/app.ts';

const t = await startApp();
test.after(() => t.close());

function refusal(fn: () => unknown): Promise<{ pointer: string | undefined; detail: string }> {
  return Promise.resolve()
    .then(fn)
    .then(
      () => assert.fail('accepted'),
      (err: unknown) => {
        assert.ok(err instanceof AppError && err.code === 'invalid_request', String(err));
        return { pointer: err.source?.pointer, detail: err.detail };
      },
    );
}

test('a name that is not a string, too long or absent reads the same on both surfaces', async () => {
  const cases: Array<[unknown, string]> = [
    [5, 'name must be a string'],
    ['x'.repeat(201), 'name must be at most 200 characters'],
    [null, 'name must not be null'],
  ];
  for (const [name, detail] of cases) {
    const viaAdmin = await refusal(() => admin.createOrganization(t.deps.db, { name, domain: 'vocabulary.example' }));
    assert.deepEqual(viaAdmin, { pointer: '/name', detail });
    const viaJsonApi = await refusal(() =>
      readAttributes({ data: { type: 'data_model', attributes: { name, slug: 'v' } } }, { type: 'data_model' }, dataModelInput),
    );
    assert.deepEqual(viaJsonApi, { pointer: '/data/attributes/name', detail });
  }
  assert.deepEqual(await refusal(() => admin.createOrganization(t.deps.db, { domain: 'vocabulary.example' })), {
    pointer: '/name',
    detail: 'name is required',
  });
  assert.deepEqual(await refusal(() => readAttributes({ data: { type: 'data_model', attributes: { slug: 'v' } } }, { type: 'data_model' }, dataModelInput)), {
    pointer: '/data/attributes/name',
    detail: 'name is required',
  });
});

test('ids: the same rule for an admin member and a JSON:API attribute', async () => {
  assert.deepEqual(await refusal(() => admin.createWorkspace(t.deps.db, { organization_id: 'not-an-id', name: 'W' })), {
    pointer: '/organization_id',
    detail: 'organization_id must be an id',
  });
});
