import { sql, type Kysely } from 'kysely';

/**
 * How often a run lost its worker mid-attempt (the lease ran out: the process died or lost
 * the database). A run that keeps killing the workers that take it is failed after
 * RUN_MAX_LEASE_LOSSES, whatever attempts it has left.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table workflow_runs add column lease_losses integer not null default 0`.execute(db);
}
