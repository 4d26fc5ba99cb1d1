/** Replaying a run: a new run with the same payload, linked by replay_of, on its own or the workflow's current version. */
import type { Principal } from '../../auth/principal.ts';
import type { RunOutcome, RunStatus } from '../../db/tables.ts';
import type { Deps } from '../../deps.ts';
import { AppError, invalidParam } from '../../errors.ts';
import { isUuid, uuidv7 } from '../../ids.ts';
import { wakeWorkers } from '../../runs/wake.ts';
import { findRun, listRuns } from './workflow-runs.sql.ts';
import { insertReplay, isRunOfDeletedWorkflow, type ReplayVersion } from './replay.sql.ts';
import { storedContext, type TraceSpan } from '../../tracing.ts';
import { RUN_OUTCOMES, RUN_STATUSES } from './resource.ts';
import { presentRun } from '../../runs/run-record.ts';
import { checkWaitingRuns } from '../../quotas/quotas.ts';
import { cancelRun, runStatus } from '../../runs/waits.sql.ts';

const isRunStatus = (s: unknown): s is RunStatus => (RUN_STATUSES as readonly unknown[]).includes(s);
const isRunOutcome = (s: unknown): s is RunOutcome => (RUN_OUTCOMES as readonly unknown[]).includes(s);

/**
 * The replay's run continues the trace of `trace` (the replay request's span: a new trace,
 * not the original's), and that span links to the original run's trace (docs/tracing.md).
 */
export async function replayRun(deps: Deps, principal: Pick<Principal, 'workspaceId'>, runId: string, version: ReplayVersion = 'original', trace?: TraceSpan) {
  await checkWaitingRuns(deps, principal.workspaceId);
  const row = isUuid(runId)
    ? await insertReplay(
        deps.db,
        principal.workspaceId,
        runId.toLowerCase(),
        uuidv7(),
        new Date(deps.clock()),
        deps.config.runMaxAttempts,
        version,
        storedContext(trace),
      )
    : undefined;
  if (!row) {
    if (isUuid(runId) && (await isRunOfDeletedWorkflow(deps.db, principal.workspaceId, runId.toLowerCase())))
      throw new AppError('conflict', 'The workflow of this run was deleted: its runs can be read, not replayed');
    throw new AppError('not_found', 'No workflow_run with this id');
  }
  trace?.set({ 'tributary.run.id': row.id, 'tributary.run.replay_of': row.replay_of, 'tributary.workflow.id': row.workflow_id });
  trace?.link({ traceparent: row.original_traceparent, tracestate: row.original_tracestate }, { 'tributary.run.id': row.replay_of });
  wakeWorkers(deps);
  return row;
}

/** The admin API's list of runs (`tributary runs list`): newest first, optionally narrowed. */
export async function adminListRuns(deps: Deps, query: Record<string, unknown>) {
  for (const k of Object.keys(query)) {
    if (!['limit', 'workspace_id', 'workflow_id', 'status', 'outcome'].includes(k))
      throw invalidParam(k, `unknown parameter ${k}; runs take limit, workspace_id, workflow_id, status and outcome`);
  }
  const limit = query.limit === undefined ? 100 : Number(query.limit);
  if (!Number.isInteger(limit) || limit < 1 || limit > 1000) throw invalidParam('limit', 'limit must be a whole number from 1 to 1000');
  for (const k of ['workspace_id', 'workflow_id'] as const) if (query[k] !== undefined && !isUuid(query[k])) throw invalidParam(k, `${k} must be an id`);
  const status = query.status;
  if (status !== undefined && !isRunStatus(status)) throw invalidParam('status', `status must be one of ${RUN_STATUSES.join(', ')}`);
  const outcome = query.outcome;
  if (outcome !== undefined && !isRunOutcome(outcome)) throw invalidParam('outcome', `outcome must be one of ${RUN_OUTCOMES.join(', ')}`);
  const rows = await listRuns(deps.db, {
    workspaceId: (query.workspace_id as string | undefined)?.toLowerCase(),
    workflowId: (query.workflow_id as string | undefined)?.toLowerCase(),
    status,
    outcome,
    limit: limit + 1,
  });
  // Runs as the JSON:API shows them: 1,000 of them stay within a known size.
  return { data: rows.slice(0, limit).map((row) => ({ ...row, ...presentRun(row) })), has_more: rows.length > limit };
}

export async function adminFindRun(deps: Deps, id: string) {
  const row = isUuid(id) ? await findRun(deps.db, id.toLowerCase()) : undefined;
  if (!row) throw new AppError('not_found', 'No workflow run with this id');
  return { ...row, ...presentRun(row) };
}

/** Replays a run of any workspace (the admin acts for every workspace). */
export async function adminReplayRun(deps: Deps, id: string, version: ReplayVersion = 'original', trace?: TraceSpan) {
  const original = await adminFindRun(deps, id);
  return replayRun(deps, { workspaceId: original.workspace_id }, original.id, version, trace);
}

/** Cancels a run of any workspace (the admin acts for every workspace), as the JSON:API's cancel does. */
export async function adminCancelRun(deps: Deps, id: string) {
  const run = await adminFindRun(deps, id);
  await cancelWorkflowRun(deps, { workspaceId: run.workspace_id }, run.id);
  return adminFindRun(deps, run.id);
}

/**
 * Cancels a run that is queued, retrying or waiting (docs/workflows.md, "Cancel"): it never
 * runs or resumes again. A running or finished run is 409; one the caller cannot see, 404.
 */
export async function cancelWorkflowRun(deps: Deps, principal: Pick<Principal, 'workspaceId'>, runId: string) {
  const id = isUuid(runId) ? runId.toLowerCase() : undefined;
  const row = id === undefined ? undefined : await cancelRun(deps.db, principal.workspaceId, id, new Date(deps.clock()));
  if (row) {
    deps.metrics.runCancelled(row.was);
    const { was: _was, ...run } = row;
    return run;
  }
  const status = id === undefined ? undefined : await runStatus(deps.db, principal.workspaceId, id);
  if (status === undefined) throw new AppError('not_found', 'No workflow_run with this id');
  throw new AppError(
    'conflict',
    status === 'running'
      ? 'The run is running: only a queued, retrying or waiting run can be cancelled (cancel it once it waits, or let the attempt end)'
      : `The run is ${status}: only a queued, retrying or waiting run can be cancelled`,
  );
}
