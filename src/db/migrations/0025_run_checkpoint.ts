import { sql, type Kysely } from 'kysely';

/**
 * workflow_runs.checkpoint: the steps of the run that have succeeded, with their outputs,
 * and how many attempts ran each step (docs/workflows.md, "Durable steps"). A later attempt
 * (a retry, a lease taken over, a restart) resumes after them. Null until a step's success
 * is recorded, and again once the run has ended; a replay is a new row and starts without one.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table workflow_runs add column checkpoint jsonb`.execute(db);
}
