/**
 * A process of the expression pool: evaluates a batch of steps' expressions, one step
 * after the other, and answers their results as plain JSON values (stringified and parsed
 * here, off the event loop of the process that asked), the batch in one message. It tells
 * the pool when a new evaluation starts (at most every PROGRESS_EVERY_MS), so the pool's
 * watchdog can tell one long evaluation from a long batch of short ones; a step's total
 * budget is checked here, before each of its evaluations.
 */
import { budgetMessage, compileExpression, describe, EXPRESSION_LIMITS, ExpressionError, type Compiled } from './expressions.ts';
import { UNSTORABLE_TEXT } from '../errors.ts';
import { mayHoldUnstorableText, unstorableTextAt } from '../json.ts';
import { serveSandbox } from '../sandbox.ts';
import type { ChildJob, ChildReply, JobReply } from './expression-pool.ts';

const timeoutMs = Number(process.argv[2]);
const memoryMb = Number(process.argv[3]);
const PROGRESS_EVERY_MS = 100;
const STEP_BUDGET_MS = timeoutMs * EXPRESSION_LIMITS.stepBudgets;
let toldAt = 0;
let stepStartedAt = 0;
const send = (m: ChildReply) => process.send!(m);

const cache = new Map<string, Compiled>();
const CACHE_MAX = 5_000;

function compiledFor(text: string): Compiled {
  let c = cache.get(text);
  if (c === undefined) {
    const r = compileExpression(text, timeoutMs);
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

function failure(err: unknown): ExpressionError {
  if (err instanceof ExpressionError) return err;
  const code = (err as { code?: unknown }).code;
  if (code === 'D1012') return new ExpressionError(budgetMessage.time(timeoutMs));
  if (code === 'D1011') return new ExpressionError(budgetMessage.depth());
  if (err instanceof RangeError) {
    // A long string or array is the heap's budget, not the stack's.
    if (/call stack/i.test(err.message)) return new ExpressionError(budgetMessage.depth());
    return new ExpressionError(budgetMessage.memory(memoryMb));
  }
  return new ExpressionError(`The expression failed: ${describe(err)}`);
}

/** The result as JSON text (JSONata sequences and functions are not JSON), within the size budget. */
function toJson(value: unknown): string | undefined {
  if (value === undefined) return undefined;
  let text: string | undefined;
  try {
    text = JSON.stringify(value, (_k, v) => (typeof v === 'function' ? undefined : v));
  } catch (err) {
    throw new ExpressionError(err instanceof RangeError ? budgetMessage.size() : 'The expression gave a value that is not JSON');
  }
  if (text !== undefined && text.length > EXPRESSION_LIMITS.maxResultBytes) throw new ExpressionError(budgetMessage.size());
  return text;
}

async function evaluate(text: string, input: unknown): Promise<unknown> {
  const now = Date.now();
  if (now - stepStartedAt > STEP_BUDGET_MS) throw new ExpressionError(budgetMessage.stepTime(STEP_BUDGET_MS));
  if (now - toldAt >= PROGRESS_EVERY_MS) {
    toldAt = now;
    send({ progress: true });
  }
  let value: unknown;
  try {
    value = await compiledFor(text).evaluate(input);
  } catch (err) {
    throw failure(err);
  }
  const json = toJson(value);
  if (json === undefined) return undefined;
  const result: unknown = JSON.parse(json);
  // Permanent: the same input gives the same text, which no step output or fact can hold.
  const at = mayHoldUnstorableText(json) ? unstorableTextAt(result) : undefined;
  if (at !== undefined) throw new ExpressionError(`The expression's result cannot be stored: ${UNSTORABLE_TEXT} (at ${at === '' ? 'the result itself' : at})`);
  return result;
}

async function run(job: ChildJob): Promise<unknown[][]> {
  const all = async (input: unknown) => {
    const out: unknown[] = [];
    for (const text of job.expressions) out.push(await evaluate(text, input));
    return out;
  };
  if (job.forEach === undefined) return [await all(job.input)];
  const value = await evaluate(job.forEach, job.input);
  const items = value === undefined ? [] : Array.isArray(value) ? value : [value];
  if (items.length > job.maxItems) throw new ExpressionError(`for_each gave ${items.length} items; a write_fact step stores at most ${job.maxItems}`);
  const base = job.input as Record<string, unknown>;
  const results: unknown[][] = [];
  for (let index = 0; index < items.length; index++) results.push(await all({ ...base, item: items[index], index }));
  return results;
}

serveSandbox<{ jobs: ChildJob[] }>(async (m) => {
  toldAt = Date.now();
  const replies: JobReply[] = [];
  for (const job of m.jobs) {
    stepStartedAt = Date.now();
    try {
      replies.push({ id: job.id, ok: true, results: await run(job) });
    } catch (err) {
      replies.push({ id: job.id, ok: false, message: failure(err).message });
    }
  }
  send({ replies });
});
