import { sql } from 'kysely';
import type { Db } from '../db/connect.ts';
import type { CatchUp } from './schedule.ts';
import type { StoredTraceContext } from '../tracing.ts';
import type { WorkflowConcurrency } from '../db/tables.ts';

export interface ScheduleRow {
  id: string;
  /** Whose schedule it is: a pass shares its ticks between workspaces (worker/schedules.ts), and its runs count in the workspace's waiting runs. */
  workspace_id: string;
  cron: string;
  timezone: string;
  catch_up: CatchUp;
  schedule_since: Date;
  last_tick_at: Date | null;
  /** Its workflow's concurrency by key, which its runs' keys are computed under (runs/concurrency.ts). */
  concurrency?: WorkflowConcurrency | null;
  /** Its workflow's state key expression, which its runs' state keys are computed under (runs/state-key.ts). */
  state_key?: string | null;
}

/**
 * The schedule triggers of active workflows, in every organization: each process that runs
 * the worker fires them, whoever's they are (the run then belongs to the trigger's
 * organization and workspace, as a delivery's does).
 */
export async function loadSchedules(db: Db): Promise<ScheduleRow[]> {
  const { rows } = await sql<ScheduleRow>`
    select t.id, t.workspace_id, t.cron, t.timezone, t.catch_up, t.schedule_since, t.last_tick_at, w.concurrency, w.state_key
    from workflow_triggers as t
    join workflows as w on w.id = t.workflow_id
    where t.type = 'schedule' and w.is_active`.execute(db);
  return rows;
}

export interface Tick {
  runId: string;
  triggerId: string;
  /** The schedule the tick was computed from: a tick of a schedule changed since does not fire. */
  cron: string;
  timezone: string;
  tick: Date;
  payloadJson: string;
  /** The key computed for its run under `concurrency` (null: none), and that concurrency as it was read. */
  concurrencyKey?: string | null;
  concurrency?: WorkflowConcurrency | null;
  /** The state key computed for its run (null: none), and the expression it was computed under. */
  stateKey?: string | null;
  stateKeyExpression?: string | null;
  /** The tick's span (tracing.ts), the root of the run's trace; nulls when tracing is off. */
  trace: StoredTraceContext;
}

/**
 * Ticks, of one or more schedules, fired in one statement: each trigger row's last_tick_at
 * moves forward to its latest tick and a run is inserted for each tick after the row's
 * last fired one. The trigger rows are locked first, in id order (processes that fire the
 * same schedules wait for one another and never deadlock); a process that waited reads
 * the rows as the other left them, so of processes that try the same tick exactly one
 * makes its run. A tick at or before the last fired one, before the schedule's since, of
 * an inactive workflow or of a schedule changed meanwhile, makes nothing. The run's source
 * identity is the trigger and the tick, so its facts are the tick's. The run's concurrency
 * limit is its workflow's as it is now; its key the one computed from the concurrency the
 * tick was planned under, or the empty key when that has changed since (still limited,
 * and the tick not lost). Its state key likewise: the one computed, or '' when the workflow's
 * state_key changed since (runs/state-key.ts). Returns the ids of the runs made.
 */
export const tickSourceIdentity = (triggerId: string, tick: Date) => `tick:${triggerId}:${tick.toISOString()}`;

export async function fireTicks(db: Db, ticks: Tick[], now: Date, maxAttempts: number): Promise<Set<string>> {
  if (ticks.length === 0) return new Set();
  const col = <T>(f: (t: Tick) => T) => ticks.map(f);
  const { rows } = await sql<{ id: string }>`
    with t as (
      select * from unnest(${col((t) => t.runId)}::uuid[], ${col((t) => t.triggerId)}::uuid[], ${col((t) => t.cron)}::text[], ${col((t) => t.timezone)}::text[],
                           ${col((t) => t.tick)}::timestamptz[], ${col((t) => t.payloadJson)}::text[], ${col((t) => tickSourceIdentity(t.triggerId, t.tick))}::text[],
                           ${col((t) => t.trace.traceparent)}::text[], ${col((t) => t.trace.tracestate)}::text[],
                           ${col((t) => t.concurrencyKey ?? null)}::text[], ${col((t) => (t.concurrency == null ? null : JSON.stringify(t.concurrency)))}::text[],
                           ${col((t) => t.stateKey ?? null)}::text[], ${col((t) => t.stateKeyExpression ?? null)}::text[])
        as t(run_id, trigger_id, cron, timezone, tick, payload, source_identity, traceparent, tracestate, concurrency_key, concurrency, state_key, state_key_expression)
    ), old as (
      select tr.id, tr.organization_id, tr.workspace_id, tr.workflow_id, tr.key, tr.cron, tr.timezone, tr.schedule_since, tr.last_tick_at, w.version, w.concurrency as workflow_concurrency, w.state_key as workflow_state_key
      from workflow_triggers as tr join workflows as w on w.id = tr.workflow_id
      where tr.id in (select trigger_id from t) and tr.type = 'schedule' and w.is_active
      order by tr.id
      for update of tr
    ), f as (
      select t.*, o.organization_id, o.workspace_id, o.workflow_id, o.key, o.version, o.workflow_concurrency, o.workflow_state_key
      from t join old as o on o.id = t.trigger_id
      where o.cron = t.cron and o.timezone = t.timezone and o.schedule_since <= t.tick and (o.last_tick_at is null or o.last_tick_at < t.tick)
    ), moved as (
      update workflow_triggers as tr set last_tick_at = m.tick
      from (select trigger_id, max(tick) as tick from f group by trigger_id) as m
      where tr.id = m.trigger_id
    ), r as (
      insert into workflow_runs (id, organization_id, workspace_id, workflow_id, workflow_version, trigger_key, payload, max_attempts, run_at, inserted_at, updated_at, source_identity,
                                 traceparent, tracestate, concurrency_key, concurrency_limit, state_key)
      select f.run_id, f.organization_id, f.workspace_id, f.workflow_id, f.version, f.key, f.payload::jsonb, ${maxAttempts}, ${now}, ${now}, ${now},
             f.source_identity, f.traceparent, f.tracestate,
             case when f.workflow_concurrency is null then null
                  when f.workflow_concurrency = f.concurrency::jsonb then f.concurrency_key else '' end,
             (f.workflow_concurrency->>'limit')::int,
             case when f.workflow_state_key is null then null
                  when f.workflow_state_key = f.state_key_expression then f.state_key else '' end
      from f
      returning id
    )
    select id from r`.execute(db);
  return new Set(rows.map((r) => r.id));
}
