/**
 * Concurrency by key (docs/workflows.md, "Concurrency"): a workflow's `{key, limit}`. The key
 * is computed once, when a run is enqueued (a delivery, a schedule's tick), and kept on the
 * run with the limit of then, so what a run waits for never changes under it; the claim
 * (queue.sql.ts) lets at most `limit` runs of one (workflow, key) execute at once.
 *
 * A key expression that fails, or gives nothing (undefined, null, ""), puts the run under
 * the empty key: it is still limited, with every other such run of the workflow. A delivery
 * is never refused for its key, nor its run left unlimited by it.
 */
import { ExpressionError, type ExpressionPoolError } from '../expressions/expressions.ts';
import type { ExpressionPool } from '../expressions/expression-pool.ts';
import { plainPath } from '../expressions/plain-path.ts';
import { canonicalJson } from '../json.ts';
import { sha256Hex } from '../secrets.ts';
import type { WorkflowConcurrency } from '../db/tables.ts';
import type { ExpressionDelivery } from '../triggers/delivery-headers.ts';

export const CONCURRENCY_LIMITS = {
  /** The most runs of one key a workflow may let execute at once. */
  maxLimit: 1000,
  /** Characters of a key expression. */
  maxKeyExpression: 1000,
  /** Bytes (UTF-8) of a key as stored; a longer one is stored as `sha256:` and its digest's hex. */
  maxKeyBytes: 200,
} as const;

/** What a run keeps: its key and the limit it was enqueued under. */
export interface RunConcurrency {
  key: string;
  limit: number;
  /** Why the key expression gave no key (the run is under the empty key): for the log only. */
  problem?: string;
}

/** The key as stored: text of the value, digested past maxKeyBytes (a key may be any size; the index may not). */
export function keyText(value: unknown): string {
  let text: string;
  if (value === undefined || value === null) text = '';
  else if (typeof value === 'string') text = value;
  else if (typeof value === 'number' || typeof value === 'boolean') text = String(value);
  else text = canonicalJson(value);
  // NUL cannot be stored in text; a digest can, and keeps keys that differ apart.
  if (Buffer.byteLength(text, 'utf8') > CONCURRENCY_LIMITS.maxKeyBytes || text.includes('\0')) return `sha256:${sha256Hex(text)}`;
  return text;
}

/**
 * The run's key under `concurrency` (null: not limited) over what the key sees: `payload`
 * and `delivery` (null for a schedule's tick). A plain path (`payload.customer_id`) is read
 * here; anything else in the expression pool, as a step's expressions are. Throws only
 * ExpressionPoolError (the pool is closing or lost a process: the enqueue can be tried again).
 */
export async function runConcurrency(
  pool: ExpressionPool,
  workspaceId: string,
  concurrency: WorkflowConcurrency | null,
  payload: unknown,
  delivery: ExpressionDelivery | null,
): Promise<RunConcurrency | null> {
  if (concurrency === null) return null;
  const input = { payload, delivery };
  const plain = plainPath(concurrency.key, input);
  if (plain !== undefined) return { key: keyText(plain.value), limit: concurrency.limit };
  try {
    const [row] = await pool.run({ workspace: workspaceId, input, expressions: [concurrency.key] });
    return { key: keyText(row?.[0]), limit: concurrency.limit };
  } catch (err) {
    if (err instanceof ExpressionError) return { key: '', limit: concurrency.limit, problem: err.message };
    throw err as ExpressionPoolError;
  }
}
