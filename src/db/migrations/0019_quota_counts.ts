import { sql, type Kysely } from 'kysely';

/**
 * The per-workspace quotas (resources/quotas.sql.ts) count at most limit + 1 rows of one
 * workspace: the waiting runs on every webhook delivery that misses its cache, the triggers
 * of one type at each save that adds one. These indexes keep each count a short range scan
 * of the workspace's own rows, however many other tenants hold.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`create index workflow_runs_waiting_idx on workflow_runs (workspace_id) where status in ('queued', 'retrying')`.execute(db);
  await sql`create index workflow_triggers_workspace_type_idx on workflow_triggers (workspace_id, type)`.execute(db);
}
