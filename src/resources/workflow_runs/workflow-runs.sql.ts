import { sql } from 'kysely';
import type { Db } from '../../db/connect.ts';

/**
 * A new run of the same workflow version and payload as `originalId`, linked to it; the
 * original must be a run of the workspace. Returns the new row, or undefined when there
 * is no such run.
 */
export async function insertReplay(db: Db, workspaceId: string, originalId: string, id: string, now: Date, maxAttempts: number, notify: boolean) {
  const result = await sql<Record<string, any>>`
    with r as (
      insert into workflow_runs (id, organization_id, workspace_id, workflow_id, workflow_version, trigger_key, delivery_id, payload, max_attempts, replay_of, run_at, inserted_at, updated_at)
      select ${id}, o.organization_id, o.workspace_id, o.workflow_id, o.workflow_version, o.trigger_key, null, o.payload, ${maxAttempts}, o.id, ${now}, ${now}, ${now}
      from workflow_runs as o where o.workspace_id = ${workspaceId} and o.id = ${originalId}
      returning *
    )
    select r.*${notify ? sql`, pg_notify('tributary_runs', '') as notified` : sql``} from r`.execute(db);
  const row = result.rows[0];
  if (row) delete row.notified;
  return row;
}
