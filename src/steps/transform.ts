/** transform: its output is the expression's value. */
import type { TransformStep } from '../db/tables.ts';
import { oneExpression } from './config.ts';
import { evaluateOne, type StepType } from './step.ts';

export const transform: StepType<TransformStep['config']> = {
  type: 'transform',
  checkpoint: 'with-next',
  validate: (config) => oneExpression(config, 'transform'),
  run: async (config, ctx) => ({ output: await evaluateOne(ctx, config.expression) }),
  describe: (config) => ({ expressions: [['expression', config.expression]] }),
};
