import { sql, type Kysely } from 'kysely';

/**
 * Schedule triggers: a trigger is a webhook (an account and a token) or a schedule (a cron
 * expression in a time zone, and what to do with ticks missed while no process ran).
 *
 * The trigger row is a schedule's tick guard: a tick fires by moving last_tick_at forward to
 * it, in the statement that inserts its run, so of the processes that try one tick exactly
 * one moves it, and a tick at or before the last fired one never fires. One row per
 * trigger, never swept. schedule_since is where counting ticks starts: when the schedule
 * was saved or changed, or the workflow was activated (ticks while it was inactive are not
 * missed ones).
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table workflow_triggers drop constraint workflow_triggers_type_check`.execute(db);
  await sql`alter table workflow_triggers alter column service_account_id drop not null`.execute(db);
  await sql`alter table workflow_triggers alter column token_hash drop not null`.execute(db);
  await sql`alter table workflow_triggers add column cron text`.execute(db);
  await sql`alter table workflow_triggers add column timezone text`.execute(db);
  await sql`alter table workflow_triggers add column catch_up text`.execute(db);
  await sql`alter table workflow_triggers add column schedule_since timestamptz(3)`.execute(db);
  await sql`alter table workflow_triggers add column last_tick_at timestamptz(3)`.execute(db);
  await sql`
    alter table workflow_triggers add constraint workflow_triggers_kind check (
      (type = 'webhook' and service_account_id is not null and token_hash is not null and cron is null)
      or (type = 'schedule' and cron is not null and timezone is not null and catch_up in ('latest', 'none') and schedule_since is not null
          and service_account_id is null and inbound_connector_id is null and token_hash is null)
    )`.execute(db);
  // Every process loads the schedules of active workflows every few seconds.
  await sql`create index workflow_triggers_schedule_idx on workflow_triggers (workflow_id) where type = 'schedule'`.execute(db);
}
