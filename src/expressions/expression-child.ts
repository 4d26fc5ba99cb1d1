/**
 * A process of the expression pool: evaluates the steps' expressions it is given, one step
 * after the other, and answers their results as plain JSON values (stringified and parsed
 * here, off the event loop of the process that asked). A message's jobs run in order.
 * Answers go together while jobs are short (one message for many), and at once when the
 * pool asks for the jobs not started back (its fairness between workspaces), with those.
 *
 * It tells the pool when it starts an evaluation (always the first after being idle, then
 * at most every PROGRESS_EVERY_MS, well within the watchdog's grace), with its own clock,
 * so the pool's watchdog times the evaluation, not the message's trip or the jobs before it.
 * A step's total budget starts when its first evaluation does, here.
 */
import { budgetMessage, compileExpression, describe, EXPRESSION_LIMITS, ExpressionError, type Compiled } from './expressions.ts';
import { UNSTORABLE_TEXT } from '../errors.ts';
import { mayHoldUnstorableText, unstorableTextAt } from '../json.ts';
import { serveSandbox } from '../sandbox.ts';
import type { ChildJob, ChildMessage, ChildReply, JobReply } from './expression-pool.ts';

const timeoutMs = Number(process.argv[2]);
const memoryMb = Number(process.argv[3]);
const PROGRESS_EVERY_MS = 100;
/** Answers wait for the next ones at most this long while jobs are short. */
const ANSWER_EVERY_MS = 20;
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
  if (stepStartedAt === 0) stepStartedAt = now;
  else if (now - stepStartedAt > STEP_BUDGET_MS) throw new ExpressionError(budgetMessage.stepTime(STEP_BUDGET_MS));
  if (now - toldAt >= PROGRESS_EVERY_MS) {
    toldAt = now;
    send({ progress: true, at: now });
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

const queue: ChildJob[] = [];
let working = false;
let giveBack = false;
let replies: JobReply[] = [];

// Twice: a message that came during the job (a giveBack) is read in the poll phase between them.
const yieldToMessages = async () => {
  await new Promise((resolve) => setImmediate(resolve));
  await new Promise((resolve) => setImmediate(resolve));
};

async function work(): Promise<void> {
  working = true;
  // Idle until now: the first evaluation tells the pool it started.
  toldAt = 0;
  let answeredAt = Date.now();
  for (;;) {
    const job = queue.shift();
    if (job === undefined) break;
    stepStartedAt = 0;
    try {
      replies.push({ id: job.id, ok: true, results: await run(job) });
    } catch (err) {
      replies.push({ id: job.id, ok: false, message: failure(err).message });
    }
    if (queue.length > 0) await yieldToMessages();
    if (giveBack) {
      giveBack = false;
      send({ replies, returned: queue.splice(0).map((j) => j.id) });
      replies = [];
      break;
    }
    const now = Date.now();
    if (queue.length === 0 || now - answeredAt >= ANSWER_EVERY_MS) {
      send({ replies });
      replies = [];
      answeredAt = now;
    }
  }
  working = false;
}

serveSandbox<ChildMessage>((m) => {
  if ('giveBack' in m) {
    // Idle: nothing to give back, but the pool waits for the answer.
    if (!working) send({ replies: [], returned: [] });
    else giveBack = true;
    return;
  }
  queue.push(...m.jobs);
  if (!working) void work();
});
