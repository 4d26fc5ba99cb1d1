/** transform: its output is the expression's value. */
import type { TransformStep } from '../db/tables.ts';
import { checked, expression, onlyMembers } from './config.ts';
import { evaluateOne, type StepType } from './step.ts';

export const transform: StepType<TransformStep['config']> = {
  type: 'transform',
  validate: (config) =>
    checked(() => {
      onlyMembers(config, ['expression'], '', "a transform step's config");
      return { expression: expression(config, 'expression', '', true)! };
    }),
  run: async (config, ctx) => ({ output: await evaluateOne(ctx, config.expression) }),
  describe: (config) => ({ expressions: [['expression', config.expression]] }),
};
