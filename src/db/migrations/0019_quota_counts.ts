import { sql, type Kysely } from 'kysely';

/**
 * The per-workspace quotas (quotas/quotas.sql.ts) count at most limit + 1 rows of one
 * workspace: the triggers of one type at each save that adds one. This index keeps that
 * count a short range scan of the workspace's own rows, however many other tenants hold.
 * (The waiting runs are counted by workflow_runs_ready_workspace_idx of 0020, which the
 * worker's claim needs anyway: one index on the hot path, not two.)
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`create index workflow_triggers_workspace_type_idx on workflow_triggers (workspace_id, type)`.execute(db);
}
