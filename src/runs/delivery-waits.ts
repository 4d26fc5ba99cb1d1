/**
 * Which waiting run a delivery resumes (docs/workflows.md, "wait_for_delivery"). Before a
 * delivery is accepted, the runs of its workflow parked on a wait_for_delivery of its trigger
 * are read (at most MAX_WAITS_CHECKED, in the order they began waiting), and each one's match
 * is evaluated in the expression pool, outside any transaction, over the new delivery's
 * `payload` and `delivery` and the waiting run's `steps`. The first that matches is resumed
 * by the accepting statement (webhooks.sql.ts), which re-checks that it still waits; that
 * delivery then starts no run of its own.
 */
import type { Db } from '../db/connect.ts';
import type { ExpressionPool } from '../expressions/expression-pool.ts';
import { ExpressionError, truthy } from '../expressions/expressions.ts';
import type { ExpressionDelivery } from '../triggers/delivery-headers.ts';
import { waitsOfTrigger } from './waits.sql.ts';

/** Waiting runs whose match one delivery evaluates at most: past them, a delivery starts its own run as if none waited. */
export const MAX_WAITS_CHECKED = 100;

export interface DeliveryToMatch {
  workspaceId: string;
  workflowId: string;
  triggerKey: string;
  payloadJson: string;
  delivery: ExpressionDelivery | null;
}

/** The id of the first waiting run the delivery matches, or undefined. */
export async function matchWaitingRun(deps: { db: Db; clock: () => number; expressions: ExpressionPool }, d: DeliveryToMatch): Promise<string | undefined> {
  const candidates = await waitsOfTrigger(deps.db, d.workspaceId, d.workflowId, d.triggerKey, new Date(deps.clock()), MAX_WAITS_CHECKED);
  if (candidates.length === 0) return undefined;
  const payload: unknown = JSON.parse(d.payloadJson);
  const matches = await Promise.all(
    candidates.map(async (c) => {
      if (c.match === null) return true;
      const steps: Record<string, unknown> = {};
      for (const s of c.steps ?? []) if (s.status === 'succeeded') steps[s.key] = s.output;
      try {
        const [[value]] = (await deps.expressions.run({
          workspace: d.workspaceId,
          input: { payload, delivery: d.delivery, steps },
          expressions: [c.match],
        })) as [[unknown]];
        return truthy(value);
      } catch (err) {
        // A match that fails on this delivery (a type error, over its budget) does not match it.
        if (err instanceof ExpressionError) return false;
        throw err;
      }
    }),
  );
  const i = matches.indexOf(true);
  return i < 0 ? undefined : candidates[i]!.run_id;
}
