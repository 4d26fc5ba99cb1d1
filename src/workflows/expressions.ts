/**
 * JSONata expressions of workflow steps: compiled when a workflow is saved (so a bad one
 * is a 422 pointing at it) and evaluated by the worker with bounds, so a hostile
 * expression fails its step instead of stalling or crashing the worker:
 * - time: JSONata's own guardrail checks the clock at every evaluation step;
 * - recursion: the same guardrail caps the evaluation depth;
 * - size: the result is measured as JSON before it is kept;
 * - the event loop: JSONata evaluates through promises that resolve at once, which would
 *   starve timers and sockets for the whole evaluation; every few milliseconds of
 *   evaluation yield to the event loop, so HTTP and heartbeats go on beside a long one;
 * - what no guardrail can interrupt (a regular expression that backtracks for ever, one
 *   huge allocation) is refused when the workflow is saved: regexes with nested
 *   quantifiers, and $pad widths beyond a bound at run time.
 */
import jsonata from 'jsonata';
import { mayHoldUnstorableText, UNSTORABLE_TEXT, unstorableTextAt } from '../json.ts';

export const EXPRESSION_LIMITS = {
  /** Characters of one expression. */
  maxLength: 10_000,
  /** Milliseconds one evaluation may take. */
  timeoutMs: 1_000,
  /** Nesting of evaluation (recursion of user functions included). */
  maxDepth: 300,
  /** Bytes of a result as JSON. */
  maxResultBytes: 1_048_576,
} as const;

export type Compiled = ReturnType<typeof jsonata>;

export class ExpressionError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ExpressionError';
  }
}

// A quantified group that itself holds a quantifier: (a+)+, (a|aa)*, (\w+\s?)* ...
const NESTED_QUANTIFIER = /\((?:[^()\\]|\\.)*[+*}](?:[^()\\]|\\.)*\)\s*(?:[+*]|\{\d+,\d*\})/;

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

/** A JSONata error as one line: its message and where in the expression it is. */
function describe(err: unknown): string {
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

// Counted across every evaluation of the process: the event loop is shared.
let steps = 0;
let lastYield = Date.now();
const YIELD_EVERY_MS = 10;

async function maybeYield(): Promise<void> {
  if ((++steps & 1023) !== 0) return;
  const now = Date.now();
  if (now - lastYield < YIELD_EVERY_MS) return;
  await new Promise((resolve) => setImmediate(resolve));
  lastYield = Date.now();
}

/** Compiles an expression or explains why it cannot be used; the reason is for a 422. */
export function compileExpression(text: string): { ok: true; compiled: Compiled } | { ok: false; reason: string } {
  if (text.length > EXPRESSION_LIMITS.maxLength) return { ok: false, reason: `is longer than ${EXPRESSION_LIMITS.maxLength} characters` };
  if (text.trim() === '') return { ok: false, reason: 'is empty' };
  let compiled: Compiled;
  try {
    // The options (timeout, stack) are JSONata's guardrail, checked at every evaluation step.
    compiled = jsonata(text, { timeout: EXPRESSION_LIMITS.timeoutMs, stack: EXPRESSION_LIMITS.maxDepth } as never);
    compiled.registerFunction('pad', boundedPad, '<x-ns?:s>');
    compiled.assign(Symbol.for('jsonata.__evaluate_entry') as never, maybeYield);
  } catch (err) {
    return { ok: false, reason: `does not compile: ${describe(err)}` };
  }
  const regexes: string[] = [];
  walkRegexes(compiled.ast(), regexes);
  const risky = regexes.find((r) => NESTED_QUANTIFIER.test(r));
  if (risky !== undefined) return { ok: false, reason: `has a regular expression with a nested quantifier (/${risky}/), which can take exponential time` };
  return { ok: true, compiled };
}

const cache = new Map<string, Compiled>();
const CACHE_MAX = 5_000;

function compiledFor(text: string): Compiled {
  let c = cache.get(text);
  if (c === undefined) {
    const r = compileExpression(text);
    if (!r.ok) throw new ExpressionError(`The expression ${r.reason}`);
    c = r.compiled;
    // The longest-unused entries go first (Map keeps insertion order; a hit re-inserts).
    if (cache.size >= CACHE_MAX) cache.delete(cache.keys().next().value!);
  } else {
    cache.delete(text);
  }
  cache.set(text, c);
  return c;
}

/**
 * Evaluates `text` over `input` within the bounds; throws ExpressionError with a message
 * fit for a step's error. The result is plain JSON (undefined when the expression
 * selects nothing).
 */
export async function evaluateExpression(text: string, input: unknown): Promise<unknown> {
  const compiled = compiledFor(text);
  let result: unknown;
  try {
    result = await compiled.evaluate(input);
  } catch (err) {
    if (err instanceof ExpressionError) throw err;
    const code = (err as { code?: unknown }).code;
    if (code === 'D1012') throw new ExpressionError(`The expression ran longer than ${EXPRESSION_LIMITS.timeoutMs} ms`);
    if (code === 'D1011' || err instanceof RangeError) throw new ExpressionError(`The expression recursed deeper than ${EXPRESSION_LIMITS.maxDepth} levels or ran out of stack`);
    throw new ExpressionError(`The expression failed: ${describe(err)}`);
  }
  return toJson(result);
}

/** The result as plain JSON (JSONata sequences and functions are not), within the size bound. */
function toJson(value: unknown): unknown {
  if (value === undefined) return undefined;
  let text: string | undefined;
  try {
    text = JSON.stringify(value, (_k, v) => (typeof v === 'function' ? undefined : v));
  } catch (err) {
    throw new ExpressionError(err instanceof RangeError ? `The expression's result is larger than ${EXPRESSION_LIMITS.maxResultBytes} bytes` : 'The expression gave a value that is not JSON');
  }
  if (text === undefined) return undefined;
  if (text.length > EXPRESSION_LIMITS.maxResultBytes) throw new ExpressionError(`The expression's result is larger than ${EXPRESSION_LIMITS.maxResultBytes} bytes`);
  const json: unknown = JSON.parse(text);
  // Permanent: the same input gives the same text, which no step output or fact can hold.
  const at = mayHoldUnstorableText(text) ? unstorableTextAt(json) : undefined;
  if (at !== undefined) throw new ExpressionError(`The expression's result cannot be stored: ${UNSTORABLE_TEXT} (at ${at === '' ? 'the result itself' : at})`);
  return json;
}
