import { sql, type Kysely } from 'kysely';

/**
 * workflow_runs.replayed_delivery_id: a replay's delivery_id stays null (a replay is no
 * delivery, and `filter[delivery_id]` finds the delivery's own run), yet its expressions see
 * the same `delivery` as the original's (docs/workflows.md, "delivery"). The id is copied
 * here, so it survives the original being swept; null for every run that is not a replay.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table workflow_runs add column replayed_delivery_id text`.execute(db);
}
