/**
 * Workflow state per key (docs/workflows.md, "Workflow state"): a workflow's `state_key`, an
 * expression over the payload and the delivery, is computed once when a run is enqueued (a
 * delivery, a schedule's tick; a replay keeps its original's) and kept on the run, so the
 * document a run reads at its claim and writes with set_state is the same at every attempt.
 *
 * A key expression that fails, or gives nothing (undefined, null, ""), gives the key '': the
 * run reads and writes the workflow's unkeyed document. As with concurrency keys, a delivery is
 * never refused for its key; the failure is logged where the key is computed.
 */
import { ExpressionError, type ExpressionPoolError } from '../expressions/expressions.ts';
import type { ExpressionPool } from '../expressions/expression-pool.ts';
import { plainPath } from '../expressions/plain-path.ts';
import type { ExpressionDelivery } from '../triggers/delivery-headers.ts';
import { keyText } from './concurrency.ts';

/** Characters of a state key expression. */
export const MAX_STATE_KEY_EXPRESSION = 1000;

/** The run's state key (null: the workflow has none, the run reads ''), and why the expression gave none. */
export interface RunStateKey {
  key: string | null;
  problem?: string;
}

/**
 * The run's key under the workflow's `state_key` expression (null: none) over `payload` and
 * `delivery` (null for a schedule's tick). Stored as concurrency keys are (keyText): text of
 * the value, digested past 200 bytes. Throws only ExpressionPoolError (the enqueue can be tried again).
 */
export async function runStateKey(
  pool: ExpressionPool,
  workspaceId: string,
  stateKey: string | null,
  payload: unknown,
  delivery: ExpressionDelivery | null,
): Promise<RunStateKey> {
  if (stateKey === null) return { key: null };
  const input = { payload, delivery };
  const plain = plainPath(stateKey, input);
  if (plain !== undefined) return { key: keyText(plain.value) };
  try {
    const [row] = await pool.run({ workspace: workspaceId, input, expressions: [stateKey] });
    return { key: keyText(row?.[0]) };
  } catch (err) {
    if (err instanceof ExpressionError) return { key: '', problem: err.message };
    throw err as ExpressionPoolError;
  }
}
