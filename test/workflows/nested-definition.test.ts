/**
 * Save-time validation of nested steps (docs/workflows.md, "switch", "for_each",
 * "on_failure", "Nesting limits"): each problem at the pointer of the nested step, keys
 * unique across the whole tree, `steps.<key>` only of steps that ran before on every path,
 * the depth and total limits.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { AppError } from '../../src/errors.ts';
import { readDefinition, WORKFLOW_LIMITS } from '../../src/workflows/definition.ts';

const AT = '/data/attributes';
const S = `${AT}/step_params`;
const attrs = (steps: unknown[], onFailure?: unknown[]) => ({
  wf_params: { name: 'Router' },
  step_params: steps,
  trigger_params: [],
  ...(onFailure ? { on_failure_params: onFailure } : {}),
});
const t = (key: string, expression = '1') => ({ key, type: 'transform', config: { expression } });
const sw = (key: string, cases: unknown[][], def: unknown[] = []) => ({
  key,
  type: 'switch',
  config: { cases: cases.map((steps, i) => ({ when: `payload.n = ${i}`, steps })), default: def },
});
const each = (key: string, steps: unknown[], extra: Record<string, unknown> = {}) => ({
  key,
  type: 'for_each',
  config: { items: 'payload.items', steps, ...extra },
});

function refuses(input: Record<string, unknown>, pointer: string, detail: RegExp): void {
  try {
    readDefinition(input);
  } catch (err) {
    assert.ok(err instanceof AppError, String(err));
    assert.equal(err.status, 422);
    assert.equal(err.source?.pointer, pointer, err.detail);
    assert.match(err.detail, detail);
    return;
  }
  assert.fail('accepted');
}

describe('nested steps at save', () => {
  it('accepts a switch and a for_each, with defaults, and reads their steps as steps', () => {
    const d = readDefinition(
      attrs([t('a'), sw('route', [[t('b', 'steps.a')], [each('loop', [t('c', 'item'), t('d', 'steps.c & steps.a')])]]), t('e', 'steps.route')]),
    );
    const route = d.steps[1]!.config as any;
    assert.equal(route.cases[1].steps[0].config.concurrency, 1);
    assert.deepEqual(route.default, []);
    assert.deepEqual(
      route.cases[1].steps[0].config.steps.map((s: any) => s.key),
      ['c', 'd'],
    );
  });

  it("names the nested step's member in its pointer", () => {
    refuses(attrs([sw('route', [[t('a')], [t('b'), t('c', '$$$(')]])]), `${S}/0/config/cases/1/steps/1/config/expression`, /expression/);
    refuses(attrs([sw('route', [[{ key: 'x', type: 'nope', config: {} }]])]), `${S}/0/config/cases/0/steps/0/type`, /type must be one of/);
    refuses(attrs([each('loop', [t('a')], { concurrency: 21 })]), `${S}/0/config/concurrency`, /from 1 to 20/);
    refuses(attrs([each('loop', [])]), `${S}/0/config/steps`, /at least one step/);
    refuses(attrs([{ key: 'route', type: 'switch', config: { cases: [] } }]), `${S}/0/config/cases`, /at least one/);
  });

  it('keeps keys unique across the whole tree, on_failure included', () => {
    refuses(attrs([t('a'), sw('route', [[t('a')]])]), `${S}/1/config/cases/0/steps/0/key`, /key "a" is used by another step/);
    refuses(attrs([t('a')], [t('a')]), `${AT}/on_failure_params/0/key`, /key "a" is used by another step/);
  });

  it('reads steps.<key> only of steps that ran before on every path', () => {
    // After a switch: not a key inside one branch.
    refuses(attrs([sw('route', [[t('b')]]), t('after', 'steps.b')]), `${S}/1/config/expression`, /steps\.b .*inside a switch branch or a for_each/);
    // Another branch's step.
    refuses(attrs([sw('route', [[t('b')], [t('c', 'steps.b')]])]), `${S}/0/config/cases/1/steps/0/config/expression`, /steps\.b /);
    // The switch itself, from inside it.
    refuses(attrs([sw('route', [[t('b', 'steps.route')]])]), `${S}/0/config/cases/0/steps/0/config/expression`, /steps\.route .*comes later/);
    // After a loop: only the loop's key.
    refuses(attrs([each('loop', [t('c')]), t('after', 'steps.c')]), `${S}/1/config/expression`, /steps\.c /);
    // Inside an item: a later step of the item.
    refuses(attrs([each('loop', [t('c', 'steps.d'), t('d')])]), `${S}/0/config/steps/0/config/expression`, /steps\.d /);
    // on_failure may read the workflow's own steps and its earlier ones, nothing nested.
    readDefinition(attrs([t('a')], [t('f', 'failure.step & steps.a'), t('g', 'steps.f')]));
    refuses(attrs([sw('route', [[t('b')]])], [t('f', 'steps.b')]), `${AT}/on_failure_params/0/config/expression`, /steps\.b /);
  });

  it('limits the depth and the steps in all', () => {
    const deep = (n: number): unknown => (n === 1 ? t('leaf') : sw(`s${n}`, [[deep(n - 1)]]));
    readDefinition(attrs([deep(WORKFLOW_LIMITS.maxDepth)]));
    refuses(
      attrs([deep(WORKFLOW_LIMITS.maxDepth + 1)]),
      `${S}/0/config/cases/0/steps/0/config/cases/0/steps/0/config/cases/0/steps/0/config/cases/0/steps`,
      /nest at most 4/,
    );
    const lists = Array.from({ length: 5 }, (_, i) => sw(`w${i}`, [Array.from({ length: 40 }, (_, j) => t(`k${i}_${j}`))]));
    refuses(attrs(lists), `${S}/4/config/cases/0/steps/35`, /at most 200 steps in all/);
  });
});

describe("a wait_for_delivery's on_timeout steps at save", () => {
  const hook = { key: 'orders', type: 'webhook', service_account_id: '6f9619ff-8b86-4d01-b42d-00cf4fc964ff' };
  const withHook = (steps: unknown[]) => ({ ...attrs(steps), trigger_params: [hook] });
  const wait = (onTimeout: unknown) => ({ key: 'paid', type: 'wait_for_delivery', config: { trigger: 'orders', timeout: '1h', on_timeout: onTimeout } });

  it('reads them as a nested list of steps, checked as a branch', () => {
    const d = readDefinition(withHook([t('a'), wait([t('late', 'steps.a'), t('note', 'steps.late')]), t('after', 'steps.paid')]));
    assert.deepEqual(
      (d.steps[1]!.config as any).on_timeout.map((s: any) => [s.key, s.config.expression]),
      [
        ['late', 'steps.a'],
        ['note', 'steps.late'],
      ],
    );
    readDefinition(withHook([wait('continue')]));
    refuses(withHook([wait('later')]), `${S}/0/config/on_timeout`, /"fail", "continue" or a list of steps/);
  });

  it('names the nested step in its pointer; keys are unique with them; later steps read only the wait', () => {
    refuses(withHook([t('a'), wait([t('late'), t('bad', '$$$(')])]), `${S}/1/config/on_timeout/1/config/expression`, /expression/);
    refuses(withHook([t('a'), wait([t('a')])]), `${S}/1/config/on_timeout/0/key`, /used by another step/);
    refuses(withHook([wait([t('late')]), t('after', 'steps.late')]), `${S}/1/config/expression`, /steps\.late /);
    refuses(withHook([wait([t('late', 'steps.paid')])]), `${S}/0/config/on_timeout/0/config/expression`, /steps\.paid .*comes later/);
    refuses(withHook([wait([{ key: 'oops', type: 'nope', config: {} }])]), `${S}/0/config/on_timeout/0/type`, /type must be one of/);
  });
});

describe("a wait_for_delivery's on_timeout steps in a workflow file", () => {
  it('are written as a map of key: {type, ...} and read back as steps; a nested error names its member', async () => {
    const { parseWorkflowText, builderParts, workflowOfResource, workflowFileDocument, renderYaml, filePathOfPointer } =
      await import('../../src/workflows/file.ts');
    const text = `name: orders
triggers:
  orders: { type: webhook }
steps:
  paid:
    type: wait_for_delivery
    trigger: orders
    timeout: 1h
    on_timeout:
      remind: { type: transform, expression: '"late"' }
  after: { type: transform, expression: steps.paid }
`;
    const { file } = parseWorkflowText(text);
    const parts = builderParts(file, '6f9619ff-8b86-4d01-b42d-00cf4fc964ff');
    assert.deepEqual((parts.step_params[0] as any).config.on_timeout, [{ key: 'remind', type: 'transform', config: { expression: '"late"' } }]);
    const d = readDefinition({ ...parts });
    const yaml = renderYaml(
      workflowFileDocument(
        workflowOfResource({ name: 'orders', is_active: true, steps: d.steps, triggers: parts.trigger_params }),
        '6f9619ff-8b86-4d01-b42d-00cf4fc964ff',
      ),
    );
    assert.match(yaml, /\n {4}on_timeout:\n {6}remind:\n {8}type: transform\n/);
    assert.deepEqual(parseWorkflowText(yaml).file.steps[0]!.config.on_timeout, [{ key: 'remind', type: 'transform', config: { expression: '"late"' } }]);
    assert.deepEqual(filePathOfPointer(`${S}/0/config/on_timeout/0/config/expression`, file), ['steps', 'paid', 'on_timeout', 'remind', 'expression']);
    // "continue" and "fail" stay words.
    assert.equal(parseWorkflowText(text.replace(/on_timeout:\n.*\n/, 'on_timeout: continue\n')).file.steps[0]!.config.on_timeout, 'continue');
  });
});
