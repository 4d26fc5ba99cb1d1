import { sql, type Selectable } from 'kysely';
import type { Db } from '../../db/connect.ts';
import type { RunOutcome, RunStatus, WorkflowRunTable } from '../../db/tables.ts';

/**
 * A new run of the same workflow version and payload as `originalId`, linked to it; the
 * original must be a run of the workspace. Returns the new row, or undefined when there
 * is no such run.
 */
export async function insertReplay(db: Db, workspaceId: string, originalId: string, id: string, now: Date, maxAttempts: number) {
  const result = await sql<Selectable<WorkflowRunTable>>`
    with r as (
      insert into workflow_runs (id, organization_id, workspace_id, workflow_id, workflow_version, trigger_key, delivery_id, payload, max_attempts, replay_of, run_at, inserted_at, updated_at)
      select ${id}, o.organization_id, o.workspace_id, o.workflow_id, o.workflow_version, o.trigger_key, null, o.payload, ${maxAttempts}, o.id, ${now}, ${now}, ${now}
      from workflow_runs as o where o.workspace_id = ${workspaceId} and o.id = ${originalId}
      returning *
    )
    select * from r`.execute(db);
  return result.rows[0];
}

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
