/**
 * The step types' registry (src/steps/index.ts) and the effects' declared wait: each type
 * is filed under its own name, a stored step of an unknown type has none, and a wait asked
 * for in this release fails clearly instead of doing nothing.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { STEP_TYPES, STEP_TYPES_BY_TYPE, stepTypeOf } from '../../src/steps/index.ts';
import { dryEffects, realEffects } from '../../src/steps/effects.ts';
import type { WorkflowStep } from '../../src/db/tables.ts';

describe('step types', () => {
  it('files each type under its own name, in the documented order', () => {
    assert.deepEqual(STEP_TYPES, [
      'transform',
      'condition',
      'write_fact',
      'http_request',
      'switch',
      'for_each',
      'delay',
      'wait_until',
      'wait_for_delivery',
      'set_state',
    ]);
    for (const name of STEP_TYPES) assert.equal(STEP_TYPES_BY_TYPE[name].type, name);
  });

  it('a stored step of a type this release does not know has no type', () => {
    assert.equal(stepTypeOf({ key: 'later', type: 'from_a_later_release', config: {} } as unknown as WorkflowStep), undefined);
    assert.equal(stepTypeOf({ key: 'proto', type: 'toString', config: {} } as unknown as WorkflowStep), undefined);
  });

  it('validate gives the first problem at its pointer under the config', () => {
    assert.deepEqual(STEP_TYPES_BY_TYPE.write_fact.validate({ data_model_slug: 'orders', data: 'payload', extra: 1 }), {
      ok: false,
      issues: [
        {
          pointer: '/extra',
          detail: '"extra" is not a member of a write_fact step\'s config (allowed: data_model_slug, mapping, data, observed_at, for_each)',
        },
      ],
    });
    assert.deepEqual(STEP_TYPES_BY_TYPE.transform.validate({ expression: 'payload.a' }), { ok: true, config: { expression: 'payload.a' } });
  });

  it('describe names what a step reads and touches', () => {
    assert.deepEqual(STEP_TYPES_BY_TYPE.write_fact.describe({ data_model_slug: 'orders', mapping: { 'a/b': 'payload.x' }, for_each: 'payload.items' }), {
      expressions: [
        ['for_each', 'payload.items'],
        ['mapping/a~1b', 'payload.x'],
      ],
      dataModel: 'orders',
    });
    const connector = '0190a0a0-0000-7000-8000-000000000000';
    assert.equal(STEP_TYPES_BY_TYPE.http_request.describe({ connector_id: connector, method: 'GET', path: '/x' }).connector, connector);
  });

  it('wait parks in a run and goes on at once in a test run, saying until when it would have waited', async () => {
    const until = new Date('2030-01-01T00:00:00.000Z');
    assert.deepEqual(await realEffects({ db: undefined as never, clock: Date.now }).wait({ key: 'pause', kind: 'delay', until }), { park: true });
    const notes = new Map();
    assert.deepEqual(await dryEffects('none', notes).wait({ key: 'pause', kind: 'delay', until }), { park: false });
    assert.equal(notes.get('pause').resume_at, until.toISOString());
  });
});
