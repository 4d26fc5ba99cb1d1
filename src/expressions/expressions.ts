/**
 * JSONata expressions of workflow steps: compiled when a workflow is saved (so a bad one
 * is a 422 pointing at it) and evaluated by the worker, always in a thread of the
 * expression pool (expression-pool.ts), never on the event loop of `serve` or `worker`:
 * a regular expression that backtracks for ever or one huge allocation cannot be
 * interrupted from inside JavaScript, only by ending the thread that runs it.
 *
 * Inside the thread, JSONata's own guardrail checks the clock and the depth at every
 * evaluation step, so most long evaluations end with a clear message before the pool's
 * hard deadline ends the thread. The result is measured as JSON before it leaves it.
 *
 * At save, regular expressions with nested or overlapping quantifiers are refused as well:
 * the deadline would stop them, but a workflow that can only time out is a mistake its
 * author wants to hear of at once.
 */
import jsonata from 'jsonata';
import safeRegex from 'safe-regex2';

export const EXPRESSION_LIMITS = {
  /** Characters of one expression. */
  maxLength: 10_000,
  /** Nesting of evaluation (recursion of user functions included). */
  maxDepth: 300,
  /** Bytes of a result as JSON. */
  maxResultBytes: 1_048_576,
  /** The expressions of one step together may take this many single time budgets. */
  stepBudgets: 10,
} as const;

export type Compiled = ReturnType<typeof jsonata>;

export class ExpressionError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ExpressionError';
  }
}

/**
 * The expression pool's own trouble, not the expression's: it is closing (a shutdown), or
 * a process was ended by a signal the pool did not send. Another attempt can succeed.
 */
export class ExpressionPoolError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ExpressionPoolError';
  }
}

/** The messages of a budget failure, shared by the thread (its own guardrail) and the pool (the hard deadline). */
const duration = (ms: number) => (ms >= 1000 && ms % 1000 === 0 ? `${ms / 1000} s` : `${ms} ms`);
export const budgetMessage = {
  time: (timeoutMs: number) => `The expression exceeded its ${duration(timeoutMs)} time budget`,
  stepTime: (ms: number) => `The step's expressions exceeded their ${duration(ms)} time budget`,
  memory: (memoryMb: number) => `The expression exceeded its memory budget (${memoryMb} MB)`,
  depth: () => `The expression recursed deeper than its depth budget (${EXPRESSION_LIMITS.maxDepth} levels)`,
  size: () => `The expression's result is larger than its size budget (${EXPRESSION_LIMITS.maxResultBytes} bytes)`,
};

function walkRegexes(node: unknown, found: string[]): void {
  if (Array.isArray(node)) {
    for (const n of node) walkRegexes(n, found);
    return;
  }
  if (node === null || typeof node !== 'object') return;
  const n = node as Record<string, unknown>;
  if (n.type === 'regex' && n.value instanceof RegExp) found.push(n.value.source);
  for (const v of Object.values(n)) if (v !== null && typeof v === 'object' && !(v instanceof RegExp)) walkRegexes(v, found);
}

// Shapes that backtrack badly beyond what star height finds: a quantified group holding an
// alternation (/^(a|aa)+$/), and three quantified copies of one atom in a row (/a*a*a*b/).
const QUANTIFIED_ALTERNATION = /\((?:[^()\\]|\\.)*\|(?:[^()\\]|\\.)*\)\s*(?:[+*]|\{\d+,\d*\})/;
const REPEATED_QUANTIFIED_ATOM = /(\\.|\[(?:[^\]\\]|\\.)*\]|[^\\()[\]|])[*+]\1[*+]\1[*+]/;

/** Why a regular expression may take exponential or high polynomial time, or undefined. */
export function riskyRegex(source: string): string | undefined {
  // An optional group repeats nothing: /(\d{2}:)?\d{2}/ is safe, though star height counts its `?`.
  if (!safeRegex(source.replace(/\)\?\??/g, ')'))) return 'a nested quantifier';
  if (QUANTIFIED_ALTERNATION.test(source)) return 'a quantified alternation';
  if (REPEATED_QUANTIFIED_ATOM.test(source)) return 'repeated quantifiers over the same characters';
  return undefined;
}

/** A JSONata error as one line: its message and where in the expression it is. */
export function describe(err: unknown): string {
  const e = err as { message?: unknown; code?: unknown; position?: unknown; token?: unknown };
  const message = typeof e.message === 'string' ? e.message : typeof e.code === 'string' ? `error ${e.code}` : String(err);
  const at = typeof e.position === 'number' ? ` (at character ${e.position})` : '';
  return `${message}${at}`;
}

const MAX_PAD = 100_000;
const boundedPad = (str: unknown, width: number, char?: string) => {
  if (str === undefined) return undefined;
  if (Math.abs(width) > MAX_PAD) throw new ExpressionError(`$pad width ${width} is beyond ${MAX_PAD}`);
  const s = String(str);
  const c = char === undefined || char === '' ? ' ' : char;
  const n = Math.abs(width) - [...s].length;
  if (n <= 0) return s;
  const padding = c.repeat(Math.ceil(n / c.length)).slice(0, n);
  return width < 0 ? padding + s : s + padding;
};

/**
 * Compiles an expression or explains why it cannot be used; the reason is for a 422.
 * `timeoutMs` arms JSONata's guardrail (only the pool's threads evaluate).
 */
export function compileExpression(text: string, timeoutMs = 1_000): { ok: true; compiled: Compiled } | { ok: false; reason: string } {
  if (text.length > EXPRESSION_LIMITS.maxLength) return { ok: false, reason: `is longer than ${EXPRESSION_LIMITS.maxLength} characters` };
  if (text.trim() === '') return { ok: false, reason: 'is empty' };
  let compiled: Compiled;
  try {
    // The options (timeout, stack) are JSONata's guardrail, checked at every evaluation step.
    compiled = jsonata(text, { timeout: timeoutMs, stack: EXPRESSION_LIMITS.maxDepth } as never);
    compiled.registerFunction('pad', boundedPad, '<x-ns?:s>');
  } catch (err) {
    return { ok: false, reason: `does not compile: ${describe(err)}` };
  }
  const regexes: string[] = [];
  walkRegexes(compiled.ast(), regexes);
  for (const r of regexes) {
    const why = riskyRegex(r);
    if (why !== undefined) return { ok: false, reason: `has a regular expression with ${why} (/${r}/), which can take exponential time` };
  }
  return { ok: true, compiled };
}

/** JSONata's $boolean: empty strings, arrays and objects, 0, null and nothing are false. */
export function truthy(v: unknown): boolean {
  if (v === undefined || v === null || v === false || v === 0 || v === '') return false;
  if (Array.isArray(v)) return v.some(truthy);
  if (typeof v === 'object') return Object.keys(v).length > 0;
  return true;
}
