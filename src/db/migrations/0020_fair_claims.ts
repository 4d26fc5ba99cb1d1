import { sql, type Kysely } from 'kysely';

/**
 * workflow_runs_ready_workspace_idx (workspace_id, run_at, id) on ready runs only: the
 * worker's fair claim (worker/queue.sql.ts) finds the workspaces with ready runs by a skip
 * scan of it (one probe per workspace, whatever each one's backlog) and then reads each
 * one's oldest few by one range of it. Ordering the whole queue by run_at made one
 * workspace's backlog delay every other workspace's runs.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`create index workflow_runs_ready_workspace_idx on workflow_runs (workspace_id, run_at, id) where status in ('queued', 'retrying')`.execute(db);
}
