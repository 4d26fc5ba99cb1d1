/**
 * A workflow's state documents (docs/workflows.md, "Workflow state"), one per key: a run's key
 * is computed when it is enqueued (runs/state-key.ts; null on the run: ''). Read with the run
 * at its claim (one subselect, no statement of its own), written by a set_state step in one upsert.
 */
import { sql, type RawBuilder } from 'kysely';
import type { Db } from '../db/connect.ts';

/** The key of a workflow's unkeyed document: a workflow without state_key, or a run whose key expression gave none. */
export const STATE_KEY = '';

/** The key of the document a run reads and writes: its own, or '' when it has none. */
export const runStateKeyOf = (run: { state_key?: string | null }): string => run.state_key ?? STATE_KEY;

/** The state a run's expressions see, as a column of a statement over runs `r` (null: never written). */
export const RUN_STATE: RawBuilder<unknown> = sql`(select s.value from workflow_state as s
  where s.workflow_id = r.workflow_id and s.workspace_id = r.workspace_id and s.key = coalesce(r.state_key, ${STATE_KEY}))`;

/** The same for a statement over workflows `w` (a test run): the unkeyed document. */
export const WORKFLOW_STATE: RawBuilder<unknown> = sql`(select s.value from workflow_state as s
  where s.workflow_id = w.id and s.workspace_id = w.workspace_id and s.key = ${STATE_KEY})`;

/** The workflow's document of `key` (null: never written), for a test run of a keyed workflow. */
export async function readWorkflowState(db: Db, scope: { workspaceId: string }, workflowId: string, key: string): Promise<unknown> {
  const { rows } = await sql<{ value: unknown }>`select value from workflow_state
    where workflow_id = ${workflowId} and workspace_id = ${scope.workspaceId} and key = ${key}`.execute(db);
  return rows[0]?.value ?? null;
}

/**
 * Sets the workflow's document of `key`; the last write wins. Nothing is written for a workflow that
 * was deleted (its state went with it): returns whether a row was written. `id` is the
 * row's when this write makes it (a UUIDv7, as every resource's).
 */
export async function writeWorkflowState(
  db: Db,
  scope: { workspaceId: string },
  workflowId: string,
  key: string,
  runId: string,
  json: string,
  now: Date,
  id: string,
): Promise<boolean> {
  const { rows } = await sql<{ id: string }>`
    insert into workflow_state (id, workspace_id, workflow_id, key, value, updated_by_run_id, inserted_at, updated_at)
    select ${id}::uuid, w.workspace_id, w.id, ${key}::text, ${json}::jsonb, ${runId}, ${now}, ${now}
    from workflows as w where w.id = ${workflowId} and w.workspace_id = ${scope.workspaceId} and w.deleted_at is null
    on conflict (workflow_id, key) do update set value = excluded.value, updated_by_run_id = excluded.updated_by_run_id, updated_at = excluded.updated_at
    returning id`.execute(db);
  return rows.length > 0;
}

/** With the workflow's DELETE, in its transaction: a deleted workflow keeps no state. */
export async function deleteWorkflowState(trx: Db, workspaceId: string, workflowId: string): Promise<void> {
  await trx.deleteFrom('workflow_state').where('workspace_id', '=', workspaceId).where('workflow_id', '=', workflowId).execute();
}
