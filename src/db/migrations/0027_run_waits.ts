import { sql, type Kysely } from 'kysely';

/**
 * Waits that hold nothing (docs/workflows.md, "Waits"):
 * - workflow_runs.status takes `waiting` (parked on a delay, wait_until or wait_for_delivery:
 *   no lease, no worker) and `cancelled`; outcome takes `cancelled`. The checks are replaced
 *   NOT VALID and then validated, so the table is not locked for the scan.
 * - workflow_runs.resume_at: when a waiting run resumes at the latest (null otherwise).
 * - The claim's index over queued, retrying and waiting runs alike (a waiting run is claimed at
 *   its run_at as any ready run is) comes with 0028's, which also tells keyed runs apart.
 * - run_waits: what a run parked on wait_for_delivery waits for, looked up by (workflow,
 *   trigger) in the order the runs began waiting when a delivery is accepted.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table workflow_runs drop constraint workflow_runs_status_check`.execute(db);
  await sql`alter table workflow_runs add constraint workflow_runs_status_check
    check (status in ('queued', 'running', 'retrying', 'waiting', 'succeeded', 'failed', 'cancelled')) not valid`.execute(db);
  await sql`alter table workflow_runs validate constraint workflow_runs_status_check`.execute(db);
  await sql`alter table workflow_runs drop constraint workflow_runs_outcome_check`.execute(db);
  await sql`alter table workflow_runs add constraint workflow_runs_outcome_check
    check (outcome in ('completed', 'stopped_at_condition', 'failed', 'dead_letter', 'cancelled')) not valid`.execute(db);
  await sql`alter table workflow_runs validate constraint workflow_runs_outcome_check`.execute(db);
  await sql`alter table workflow_runs add column resume_at timestamptz(3)`.execute(db);
  await sql`
    create table run_waits (
      run_id uuid primary key references workflow_runs (id) on delete cascade,
      workspace_id uuid not null,
      workflow_id uuid not null,
      trigger_key text not null,
      match text,
      timeout_at timestamptz(3) not null,
      delivery jsonb,
      matched_at timestamptz(3),
      inserted_at timestamptz(3) not null
    )`.execute(db);
  await sql`create index run_waits_trigger_idx on run_waits (workflow_id, trigger_key, inserted_at, run_id) where matched_at is null`.execute(db);
}
