/** condition: its output is whether the expression's value is truthy; false skips the rest of the run, a success. */
import type { ConditionStep } from '../db/tables.ts';
import { oneExpression } from './config.ts';
import { evaluateOne, type StepType } from './step.ts';
import { truthy } from '../expressions/expressions.ts';

export { truthy };

export const condition: StepType<ConditionStep['config']> = {
  type: 'condition',
  checkpoint: 'with-next',
  validate: (config) => oneExpression(config, 'condition'),
  run: async (config, ctx) => {
    const value = await evaluateOne(ctx, config.expression);
    const output = truthy(value);
    // What the expression gave, before truthiness: the record keeps it (worker/execute.ts).
    return { output, value, ...(output ? {} : { stop: { reason: `condition false at step ${ctx.key}` } }) };
  },
  describe: (config) => ({ expressions: [['expression', config.expression]] }),
};
