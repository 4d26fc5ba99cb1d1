import type { Db } from '../../db/connect.ts';
import type { RunOutcome, RunStatus } from '../../db/tables.ts';

/** The public columns of a run (never its lease or queue columns). */
const RUN_COLUMNS = [
  'id',
  'organization_id',
  'workspace_id',
  'workflow_id',
  'workflow_version',
  'trigger_key',
  'delivery_id',
  'payload',
  'status',
  'attempt',
  'max_attempts',
  'steps',
  'error',
  'replay_of',
  'outcome',
  'facts_written',
  'traceparent',
  'inserted_at',
  'updated_at',
  'started_at',
  'finished_at',
] as const;

export interface RunListFilter {
  workspaceId?: string;
  workflowId?: string;
  status?: RunStatus | undefined;
  outcome?: RunOutcome | undefined;
  limit: number;
}

/** Runs across workspaces, for the admin CLI: newest first. */
export function listRuns(db: Db, f: RunListFilter) {
  let q = db.selectFrom('workflow_runs').select(RUN_COLUMNS).orderBy('inserted_at', 'desc').orderBy('id', 'desc').limit(f.limit);
  if (f.workspaceId) q = q.where('workspace_id', '=', f.workspaceId);
  if (f.workflowId) q = q.where('workflow_id', '=', f.workflowId);
  if (f.status) q = q.where('status', '=', f.status);
  if (f.outcome) q = q.where('outcome', '=', f.outcome);
  return q.execute();
}

export function findRun(db: Db, id: string) {
  return db.selectFrom('workflow_runs').select(RUN_COLUMNS).where('id', '=', id).executeTakeFirst();
}
