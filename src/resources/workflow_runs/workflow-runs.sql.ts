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
  'resume_at',
] as const;

export interface RunListFilter {
  workspaceId?: string;
  workflowId?: string;
  status?: RunStatus | undefined;
  outcome?: RunOutcome | undefined;
  limit: number;
}

const RUN_REFS = RUN_COLUMNS.map((c) => `r.${c}` as const);

/** Runs with their workflow's name, in the same statement: a list of runs names them without a query per run. */
const runsWithNames = (db: Db) =>
  db
    .selectFrom('workflow_runs as r')
    .leftJoin('workflows as w', 'w.id', 'r.workflow_id')
    .select([...RUN_REFS, 'w.name as workflow_name']);

/** Runs across workspaces, for the admin CLI: newest first. */
export function listRuns(db: Db, f: RunListFilter) {
  let q = runsWithNames(db).orderBy('r.inserted_at', 'desc').orderBy('r.id', 'desc').limit(f.limit);
  if (f.workspaceId) q = q.where('r.workspace_id', '=', f.workspaceId);
  if (f.workflowId) q = q.where('r.workflow_id', '=', f.workflowId);
  if (f.status) q = q.where('r.status', '=', f.status);
  if (f.outcome) q = q.where('r.outcome', '=', f.outcome);
  return q.execute();
}

export function findRun(db: Db, id: string) {
  return runsWithNames(db).where('r.id', '=', id).executeTakeFirst();
}
