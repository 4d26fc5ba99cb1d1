/**
 * Which steps an expression reads through `steps.<key>`, found in JSONata's syntax tree
 * rather than in the text (a string, a comment or a field `x.steps.y` of the payload is no
 * reference). Only paths read against the run context count: at the expression's top, in a
 * function's arguments, an operand, a block; not inside a later step of a path or a
 * predicate, where `steps` is a field of the current item. `$$` always names the context.
 */
import jsonata from 'jsonata';

export interface StepRef {
  key: string;
  /** Where in the expression (JSONata's character position). */
  position: number | undefined;
}

type Node = Record<string, unknown>;

const isNode = (v: unknown): v is Node => v !== null && typeof v === 'object' && !Array.isArray(v) && !(v instanceof RegExp);
const isName = (n: unknown, value?: string): n is Node => isNode(n) && n.type === 'name' && (value === undefined || n.value === value);

/** The `steps.<key>` a path reads, when it starts at the run context. */
function refOf(path: Node, atRoot: boolean): StepRef | undefined {
  const steps = Array.isArray(path.steps) ? path.steps : [];
  let at = 0;
  const first = steps[0];
  if (isNode(first) && first.type === 'variable' && (first.value === '$' || (first.value === '' && atRoot))) at = 1;
  else if (!atRoot) return undefined;
  const s = steps[at];
  const k = steps[at + 1];
  // `steps[0]` or `steps{...}` read the steps object as a whole: no key to check.
  if (!isName(s, 'steps') || s.stages !== undefined || s.group !== undefined || !isName(k)) return undefined;
  return { key: String(k.value), position: typeof k.position === 'number' ? k.position : undefined };
}

function walk(node: unknown, atRoot: boolean, found: StepRef[]): void {
  if (Array.isArray(node)) {
    for (const n of node) walk(n, atRoot, found);
    return;
  }
  if (!isNode(node)) return;
  if (node.type === 'path') {
    const ref = refOf(node, atRoot);
    if (ref) found.push(ref);
    const steps = Array.isArray(node.steps) ? node.steps : [];
    // A path's later steps, and every step's predicates, read the current item, not the context.
    steps.forEach((s, i) => walk(s, i === 0 && atRoot, found));
    for (const [k, v] of Object.entries(node)) if (k !== 'steps') walk(v, false, found);
    return;
  }
  for (const [k, v] of Object.entries(node)) {
    if (k === 'stages' || k === 'predicate' || k === 'group' || k === 'focus' || k === 'index') walk(v, false, found);
    else walk(v, atRoot, found);
  }
}

/** The step keys an expression reads from the run context's `steps`. The expression compiles (definition.ts checked it). */
export function stepRefs(expression: string): StepRef[] {
  const found: StepRef[] = [];
  walk(jsonata(expression).ast(), true, found);
  return found;
}

/**
 * Why an expression of a step may not read these steps, or undefined. `before`: the steps
 * that have run before it on every path (the earlier steps of its list and of the lists
 * holding it); `all`: every key of the workflow, to say why another is not readable.
 */
export function stepRefProblem(expression: string, before: readonly string[], self: string, all: ReadonlyMap<string, 'later' | 'nested'>): string | undefined {
  for (const ref of stepRefs(expression)) {
    if (before.includes(ref.key)) continue;
    const kind = all.get(ref.key);
    const where =
      ref.key === self
        ? ' (it is this step)'
        : kind === 'nested'
          ? ' (it is inside a switch branch or a for_each, which does not run before this step on every path: read the switch or for_each step instead)'
          : kind === 'later'
            ? ' (it comes later)'
            : '';
    const list = before.length === 0 ? 'no step comes before it' : `steps before it: ${before.join(', ')}`;
    const at = ref.position === undefined ? '' : ` (at character ${ref.position})`;
    return `steps.${ref.key}${at} is not a step before this one${where}; ${list}`;
  }
  return undefined;
}
