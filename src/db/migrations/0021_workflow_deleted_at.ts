import { sql, type Kysely } from 'kysely';

/**
 * workflows.deleted_at: a deleted workflow is kept, hidden, so that its runs (and their
 * workflow_id, a foreign key) stay readable. Its triggers are removed by the delete
 * itself (resources/workflows/service.ts), which is what stops deliveries and schedules.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table workflows add column deleted_at timestamptz(3)`.execute(db);
}
