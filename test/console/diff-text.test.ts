/**
 * The text a version diff compares (console/src/pages/workflow-diff-text.ts): the steps as
 * YAML that reads back as the same steps, a value of several lines as one text line per line
 * (so no line holds an escaped newline), and a line diff that rebuilds both sides.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import fc from 'fast-check';
import YAML from 'yaml';
import { lineDiff, stepsText } from '../../console/src/pages/workflow-diff-text.ts';
import { runs } from '../helpers/property.ts';

// Printable text with spaces, tabs and line breaks where they matter most: at either end.
const line = fc.stringMatching(/^[ \t!-~]{0,12}$/);
const multiLine = fc.array(line, { minLength: 2, maxLength: 6 }).map((lines) => lines.join('\n'));
const value = fc.oneof(multiLine, line, fc.integer(), fc.boolean(), fc.constant(null));
const step = fc.record({
  key: fc.stringMatching(/^[a-z][a-z0-9_]{0,8}$/),
  type: fc.constantFrom('transform', 'condition', 'write_fact'),
  config: fc.record({
    expression: multiLine,
    data: fc.dictionary(fc.stringMatching(/^[a-z][a-z_]{0,6}$/), value, { maxKeys: 3 }),
    list: fc.array(value, { maxLength: 3 }),
  }),
});

it('writes steps as YAML that reads back as the same steps', () => {
  fc.assert(
    fc.property(fc.array(step, { minLength: 1, maxLength: 3 }), (steps) => {
      const text = stepsText(steps);
      assert.deepEqual(YAML.parse(`${text.join('\n')}\n`), JSON.parse(JSON.stringify(steps)), text.join('\n'));
      // An expression's lines of text are lines of their own, not one quoted string with \n in
      // it (unless it ends in a line of blanks without a break, which a block cannot hold).
      for (const s of steps.filter((x) => !/\n[ \t]+$/.test(x.config.expression)))
        for (const l of s.config.expression.split('\n').filter((x) => /\S/.test(x)))
          assert.ok(
            text.some((t) => t.trimStart() === l.trimStart()),
            `no line of its own for ${JSON.stringify(l)}`,
          );
    }),
    { numRuns: runs(300) },
  );
});

it('writes each line of a multi-line value as a line of its own', () => {
  const expression = '(\n  $total := payload.total;\n  {"total": $total}\n)';
  assert.deepEqual(stepsText([{ key: 'shape', type: 'transform', config: { expression } }]), [
    '- key: shape',
    '  type: transform',
    '  config:',
    '    expression: |-',
    '      (',
    '        $total := payload.total;',
    '        {"total": $total}',
    '      )',
  ]);
  // A first line that starts with spaces says its indentation; trailing breaks are kept.
  assert.deepEqual(stepsText([{ key: 'k', type: 't', config: { e: '  a\nb\n\n' } }]).slice(3), ['    e: |2+', '        a', '      b', '']);
});

it('diffs lines so that both sides can be rebuilt from the diff', () => {
  fc.assert(
    fc.property(fc.array(fc.constantFrom('a', 'b', 'c', 'd'), { maxLength: 12 }), fc.array(fc.constantFrom('a', 'b', 'c', 'd'), { maxLength: 12 }), (a, b) => {
      const d = lineDiff(a, b);
      assert.deepEqual(
        d.filter((l) => l.op !== '+').map((l) => l.text),
        a,
      );
      assert.deepEqual(
        d.filter((l) => l.op !== '-').map((l) => l.text),
        b,
      );
    }),
    { numRuns: runs(300) },
  );
});
