import { sql, type Kysely } from 'kysely';

/**
 * Why a run ended, and what it wrote (issue 22):
 * - outcome: null until the run finishes; then `completed` (every step ran),
 *   `stopped_at_condition` (a condition was false and the rest was skipped), `failed` (a step
 *   failed permanently), or `dead_letter` (a transient failure used the last attempt).
 * - facts_written: facts the run's write_fact steps stored (duplicates not counted).
 * - source_identity: what the facts' source keys derive from, so that a retry or a replay on
 *   the same version stores no duplicate: the delivery identity (the guard key) for a
 *   delivery, the trigger and tick for a schedule, copied from the original by a replay.
 *   Runs made before this migration have none: their facts keep the run-id keys.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table workflow_runs add column outcome text`.execute(db);
  await sql`alter table workflow_runs add constraint workflow_runs_outcome_check
    check (outcome in ('completed', 'stopped_at_condition', 'failed', 'dead_letter'))`.execute(db);
  await sql`alter table workflow_runs add column facts_written integer not null default 0`.execute(db);
  await sql`alter table workflow_runs add column source_identity text`.execute(db);
  // Runs finished before: their outcome as far as the row tells it (a succeeded run skips
  // steps only after a false condition; which failures were transient is not recorded).
  await sql`update workflow_runs set outcome = case
      when status = 'failed' then 'failed'
      when steps @> '[{"status": "skipped"}]'::jsonb then 'stopped_at_condition'
      else 'completed' end
    where status in ('succeeded', 'failed')`.execute(db);
  // Lists filter on the outcome within a workspace, newest first.
  await sql`create index workflow_runs_outcome_idx on workflow_runs (workspace_id, outcome, inserted_at)`.execute(db);
  // A bulk replay leaves out runs already replayed (an anti-join on replay_of), and deleting
  // a run sets its replays' replay_of to null: both look runs up by it.
  await sql`create index workflow_runs_replay_of_idx on workflow_runs (replay_of) where replay_of is not null`.execute(db);
}
