/**
 * switch: cases in order, each a JSONata expression and its steps, and a `default` list;
 * the first case whose expression is truthy (as a condition's) runs, else the default.
 * Its output is the output of the last step of the branch that ran (null for an empty
 * one); its record keeps which branch ran and the records of the branch's steps.
 *
 * The branch is chosen once: it is kept with the run's checkpoint, so a later attempt
 * resumes inside the same branch even if an expression would now choose another.
 */
import type { StepRecord, SwitchConfig, WorkflowStep } from '../db/tables.ts';
import { isObject } from '../json.ts';
import { checked, ConfigIssue, expression, onlyMembers } from './config.ts';
import { truthy } from './condition.ts';
import { evaluate, type StepType } from './step.ts';

/** Cases one switch may hold. */
export const MAX_SWITCH_CASES = 50;

/** A nested list as given: an array (its steps are checked by the definition, which knows the tree). */
export function stepList(obj: Record<string, unknown>, name: string, at: string, required: boolean): WorkflowStep[] {
  const v = obj[name];
  if (v === undefined || v === null) {
    if (required) throw new ConfigIssue(`${at}/${name}`, `${name} is required (a list of steps)`);
    return [];
  }
  if (!Array.isArray(v)) throw new ConfigIssue(`${at}/${name}`, `${name} must be a list of steps`);
  return [...v] as WorkflowStep[];
}

function readSwitch(config: Record<string, unknown>): SwitchConfig {
  onlyMembers(config, ['cases', 'default'], '', "a switch step's config");
  const cases = config.cases;
  if (!Array.isArray(cases) || cases.length === 0) throw new ConfigIssue('/cases', 'cases must be a list of at least one {when, steps}');
  if (cases.length > MAX_SWITCH_CASES) throw new ConfigIssue('/cases', `cases may hold at most ${MAX_SWITCH_CASES} cases`);
  return {
    cases: cases.map((c, i) => {
      const at = `/cases/${i}`;
      if (!isObject(c)) throw new ConfigIssue(at, 'a case must be an object {when, steps}');
      onlyMembers(c, ['when', 'steps'], at, 'a case');
      return { when: expression(c, 'when', at, true)!, steps: stepList(c, 'steps', at, true) };
    }),
    default: stepList(config, 'default', '', false),
  };
}

export const switchStep: StepType<SwitchConfig> = {
  type: 'switch',
  // Its branch rides with the next checkpoint: choosing it has no effect to repeat.
  checkpoint: 'with-next',
  validate: (config) => checked(() => readSwitch(config)),
  describe: (c) => ({
    expressions: c.cases.map((k, i) => [`cases/${i}/when`, k.when]),
    lists: [
      ...c.cases.map((k, i) => ({ pointer: `cases/${i}/steps`, steps: k.steps, kind: 'branch' as const })),
      { pointer: 'default', steps: c.default, kind: 'branch' },
    ],
  }),
  run: async (c, ctx) => {
    if (!ctx.nested) throw new Error('switch runs only in the executor');
    const record = ctx.record ?? {};
    let branch = (ctx.progress as { branch?: number | 'default' } | undefined)?.branch;
    if (branch === undefined) {
      // Every case in one job of the pool: they are pure, and one job costs less than several.
      const [values] = await evaluate(ctx, { input: ctx.input, expressions: c.cases.map((k) => k.when) });
      const first = values!.findIndex(truthy);
      branch = first === -1 ? 'default' : first;
      ctx.noteProgress?.({ branch });
    }
    const steps = branch === 'default' ? c.default : (c.cases[branch]?.steps ?? []);
    const into: StepRecord[] = [];
    record.branch = branch;
    record.steps = into;
    ctx.span?.set({ 'tributary.switch.branch': String(branch) });
    // The branch sees what the switch sees; steps after the switch see only the switch's output.
    const r = await ctx.nested.list(steps, { into, input: { ...ctx.input, steps: { ...ctx.input.steps } }, prefix: '', span: ctx.span });
    return { output: r.output ?? null };
  },
};
