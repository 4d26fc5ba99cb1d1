import { sql, type Kysely } from 'kysely';

/**
 * Concurrency by key (docs/workflows.md, "Concurrency"). workflows.concurrency and
 * workflow_versions.concurrency hold a workflow's `{key, limit}` (null: no limit); a run
 * keeps the key computed when it was enqueued and the limit of then (workflow_runs
 * concurrency_key, concurrency_limit; null: not limited). All nullable, no default: rows
 * of before stay as they were, and a process of the release before reads and writes them
 * unchanged (it claims keyed runs without their limit until it is replaced).
 *
 * Four partial indexes, each empty unless runs are keyed, but the first:
 * - workflow_runs_ready_unkeyed_idx: the fair claim of runs without a key (runs/queue.sql.ts)
 *   as workflow_runs_ready_workspace_idx of 0020 serves it, without the keyed runs that wait
 *   their turn (a claim must not read through a backlog held back by its limit). Waiting runs
 *   are in it: a parked run is claimed at its run_at (0027), its wait over.
 * - workflow_runs_keyed_queued_idx: a key's runs that wait for a slot (queued, retrying, and
 *   parked ones, which take their place again when their wait is over),
 *   in enqueue order: the keys that have some are found by a skip scan, and a claim reads
 *   a key's first few, never its backlog.
 * - workflow_runs_keyed_ready_idx: whether any keyed run's time has come (the claim's one probe
 *   for the keyed claim), read as a range, so parked keyed runs are not read.
 * - workflow_runs_keyed_running_idx: a key's runs that hold a slot (running).
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table workflows add column concurrency jsonb`.execute(db);
  await sql`alter table workflow_versions add column concurrency jsonb`.execute(db);
  await sql`alter table workflow_runs add column concurrency_key text, add column concurrency_limit integer`.execute(db);
  await sql`create index workflow_runs_ready_unkeyed_idx on workflow_runs (workspace_id, run_at, id)
    where status in ('queued', 'retrying', 'waiting') and concurrency_key is null`.execute(db);
  await sql`create index workflow_runs_keyed_queued_idx on workflow_runs (workflow_id, concurrency_key, inserted_at, id)
    where status in ('queued', 'retrying', 'waiting') and concurrency_key is not null`.execute(db);
  await sql`create index workflow_runs_keyed_ready_idx on workflow_runs (run_at)
    where status in ('queued', 'retrying', 'waiting') and concurrency_key is not null`.execute(db);
  await sql`create index workflow_runs_keyed_running_idx on workflow_runs (workflow_id, concurrency_key)
    where status = 'running' and concurrency_key is not null`.execute(db);
}
