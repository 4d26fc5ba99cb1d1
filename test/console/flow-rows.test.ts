/**
 * The flow's rows (console/src/pages/workflow-flow-rows.ts): nested steps under their step, a
 * switch's cases and default as branches, a for_each's loop, waits said with what they wait
 * for, on the configs of docs/workflows.md (here the console's GitHub router template).
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { parseWorkflowText } from '../../src/workflows/file.ts';
import { flowRows } from '../../console/src/pages/workflow-flow-rows.ts';
import { WORKFLOW_TEMPLATES } from '../../console/src/pages/workflow-templates.ts';

const shown = (rows: ReturnType<typeof flowRows>) =>
  rows.map((r) => `${'  '.repeat(r.depth)}${r.kind === 'branch' ? `[${r.label}]` : `${r.step.key} (${r.step.type})${r.note ? `: ${r.note}` : ''}`}`);

it('draws a switch as its cases and default, each with its steps nested', () => {
  const router = WORKFLOW_TEMPLATES.find((t) => t.id === 'github-router')!;
  assert.deepEqual(shown(flowRows(parseWorkflowText(router.yaml).file.steps)), [
    'route (switch): branches: 2 cases and a default; the first true case runs',
    '  [case 1: when delivery.headers."x-github-event" = "push"]',
    '  pushed (transform)',
    '  [case 2: when delivery.headers."x-github-event" = "issues"]',
    '  issue (transform)',
    '  [default]',
    '  other (transform)',
  ]);
});

it('draws a loop and the waits with what they wait for', () => {
  const rows = flowRows([
    { key: 'each', type: 'for_each', config: { items: 'payload.lines', concurrency: 5, steps: [{ key: 'store', type: 'write_fact', config: {} }] } },
    { key: 'pause', type: 'delay', config: { duration: '"10m"' } },
    { key: 'later', type: 'wait_until', config: { at: 'payload.due' } },
    {
      key: 'paid',
      type: 'wait_for_delivery',
      config: { trigger: 'orders', match: 'payload.id = steps.each[0]', timeout: '1h', on_timeout: [{ key: 'remind', type: 'transform', config: {} }] },
    },
  ]);
  assert.deepEqual(shown(rows), [
    'each (for_each): loop: its steps run for each item of payload.lines, 5 at once',
    '  [for each item]',
    '  store (write_fact)',
    'pause (delay): waits "10m"',
    'later (wait_until): waits until payload.due',
    'paid (wait_for_delivery): waits for a delivery on orders where payload.id = steps.each[0], at most 1h; then its on-timeout steps on timeout',
    '  [on timeout]',
    '  remind (transform)',
  ]);
});
