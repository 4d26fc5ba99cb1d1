/**
 * Runs parked on waits, in SQL: the waits a delivery may resume (waitsOfTrigger; whether there
 * are any is checked by the accepting statement, webhooks.sql.ts), resuming one with the
 * delivery (in that statement too), and cancelling a run
 * that has not started or is parked (cancelRun). Each takes its workspace.
 */
import { sql, type Selectable } from 'kysely';
import type { Db } from '../db/connect.ts';
import type { RunStatus, StepRecord, WorkflowRunTable } from '../db/tables.ts';

/** A waiting run a delivery may resume: its match and the outputs of its steps so far (what its match sees as `steps`). */
export interface WaitCandidate {
  run_id: string;
  match: string | null;
  steps: StepRecord[] | null;
}

/**
 * The runs of a workflow parked on a wait_for_delivery of `triggerKey`, not yet matched and
 * not timed out, in the order they began waiting: at most `limit` (MAX_WAITS_CHECKED).
 */
export async function waitsOfTrigger(db: Db, workspaceId: string, workflowId: string, triggerKey: string, now: Date, limit: number): Promise<WaitCandidate[]> {
  const { rows } = await sql<WaitCandidate>`
    select w.run_id, w.match, r.checkpoint->'steps' as steps
    from run_waits as w join workflow_runs as r on r.id = w.run_id
    where w.workflow_id = ${workflowId} and w.trigger_key = ${triggerKey} and w.matched_at is null and w.timeout_at > ${now}
      and w.workspace_id = ${workspaceId} and r.status = 'waiting'
    order by w.inserted_at, w.run_id
    limit ${limit}`.execute(db);
  return rows;
}

/** The statuses a run can be cancelled from: it has not started, or it holds nothing (docs/workflows.md, "Cancel"). */
export const CANCELLABLE: readonly RunStatus[] = ['queued', 'retrying', 'waiting'];

/**
 * Cancels the run if it is queued, retrying or waiting: status and outcome `cancelled`,
 * finished now, its parked step shown skipped, its wait dropped (a delivery then starts its
 * own run). Returns the run and the status it had, or undefined when it was not cancellable
 * (or is not the workspace's).
 */
export async function cancelRun(
  db: Db,
  workspaceId: string,
  runId: string,
  now: Date,
): Promise<(Selectable<WorkflowRunTable> & { was: RunStatus }) | undefined> {
  const { rows } = await sql<Selectable<WorkflowRunTable> & { was: RunStatus }>`
    with o as (
      select id, status from workflow_runs where id = ${runId} and workspace_id = ${workspaceId}
    ), c as (
      update workflow_runs as r
      set status = 'cancelled', outcome = 'cancelled', finished_at = ${now}, resume_at = null, checkpoint = null,
          locked_by = null, locked_until = null, updated_at = ${now},
          steps = (select coalesce(jsonb_agg(case when e.s->>'status' = 'waiting'
                     then e.s || jsonb_build_object('status', 'skipped', 'reason', 'run cancelled') else e.s end order by e.n), '[]'::jsonb)
                   from jsonb_array_elements(r.steps) with ordinality as e(s, n))
      from o
      where r.id = o.id and r.workspace_id = ${workspaceId} and r.status in ('queued', 'retrying', 'waiting')
      returning r.*, o.status as was
    ), gone as (
      delete from run_waits where run_id in (select id from c)
    )
    select * from c`.execute(db);
  return rows[0];
}

/** A run's status in the workspace, or undefined when it has none there. */
export async function runStatus(db: Db, workspaceId: string, runId: string): Promise<RunStatus | undefined> {
  const { rows } = await sql<{ status: RunStatus }>`select status from workflow_runs where id = ${runId} and workspace_id = ${workspaceId}`.execute(db);
  return rows[0]?.status;
}

/** The delivery that resumed a wait_for_delivery, as its run keeps it (run_waits.delivery). */
export interface ParkedDelivery {
  payload: unknown;
  id: string | null;
  headers: Record<string, string> | null;
}
