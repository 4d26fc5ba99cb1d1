/**
 * set_state: {value}. Sets the workflow's state document (docs/workflows.md, "Workflow state")
 * to the expression's value; the later steps of the run, and every later run, read it as
 * `state`. Its output is the value set.
 */
import type { SetStateStep } from '../db/tables.ts';
import { permanentFailure } from '../errors.ts';
import { checked, expression, onlyMembers } from './config.ts';
import { evaluateOne, type StepType } from './step.ts';

/** The largest state document, as JSON: state is a cursor or a few marks, not a store (facts are). */
export const STATE_MAX_BYTES = 65_536;

export const setState: StepType<SetStateStep['config']> = {
  type: 'set_state',
  // Recorded before the next step: were the process to die after the write, the steps since the
  // last record would run again seeing the new state, not the one they saw (a counter would count twice).
  checkpoint: 'now',
  validate: (config) =>
    checked(() => {
      onlyMembers(config, ['value'], '', "a set_state step's config");
      return { value: expression(config, 'value', '', true)! };
    }),
  run: async (config, ctx, effects) => {
    const evaluated = await evaluateOne(ctx, config.value);
    // Nothing is null: the document a run before any set_state reads.
    const value = evaluated === undefined ? null : evaluated;
    const json = JSON.stringify(value);
    const bytes = Buffer.byteLength(json);
    if (bytes > STATE_MAX_BYTES)
      throw permanentFailure(
        `The state would be ${bytes} bytes as JSON; a workflow's state is at most ${STATE_MAX_BYTES} bytes (keep a cursor, not the items)`,
      );
    await effects.setState({ key: ctx.key, run: ctx.run, value, json });
    return { output: value, state: { value } };
  },
  describe: (config) => ({ expressions: [['value', config.value]] }),
};
