import { sql } from 'kysely';
import type { Db } from '../db/connect.ts';
import type { CatchUp } from './schedule.ts';
import type { StoredTraceContext } from '../tracing.ts';

export interface ScheduleRow {
  id: string;
  /** Whose runs its ticks make: the waiting-runs quota is the workspace's. */
  workspace_id: string;
  cron: string;
  timezone: string;
  catch_up: CatchUp;
  schedule_since: Date;
  last_tick_at: Date | null;
}

/**
 * The schedule triggers of active workflows, in every organization: each process that runs
 * the worker fires them, whoever's they are (the run then belongs to the trigger's
 * organization and workspace, as a delivery's does).
 */
export async function loadSchedules(db: Db): Promise<ScheduleRow[]> {
  const { rows } = await sql<ScheduleRow>`
    select t.id, t.workspace_id, t.cron, t.timezone, t.catch_up, t.schedule_since, t.last_tick_at
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
  now: Date;
  payloadJson: string;
  maxAttempts: number;
  /** The tick's span (tracing.ts), the root of the run's trace; nulls when tracing is off. */
  trace: StoredTraceContext;
}

/**
 * One tick: the trigger row's last_tick_at moves forward to the tick and the run is
 * inserted, in one statement, so of processes that try the same tick exactly one moves it
 * (the others wait on the row and then find it moved) and makes the run. A tick at or
 * before the last fired one, before the schedule's since, of an inactive workflow or of a
 * schedule changed meanwhile, makes nothing. The run's source identity is the trigger and
 * the tick, so its facts are the tick's. Returns the run's id, or undefined.
 */
export const tickSourceIdentity = (triggerId: string, tick: Date) => `tick:${triggerId}:${tick.toISOString()}`;

export async function fireTick(db: Db, t: Tick): Promise<string | undefined> {
  const { rows } = await sql<{ id: string }>`
    with g as (
      update workflow_triggers as t set last_tick_at = ${t.tick}
      from workflows as w
      where t.id = ${t.triggerId} and t.type = 'schedule' and w.id = t.workflow_id and w.is_active
        and t.cron = ${t.cron} and t.timezone = ${t.timezone}
        and t.schedule_since <= ${t.tick} and (t.last_tick_at is null or t.last_tick_at < ${t.tick})
      returning t.organization_id, t.workspace_id, t.workflow_id, w.version, t.key
    ), r as (
      insert into workflow_runs (id, organization_id, workspace_id, workflow_id, workflow_version, trigger_key, payload, max_attempts, run_at, inserted_at, updated_at, source_identity,
                                 traceparent, tracestate)
      select ${t.runId}, g.organization_id, g.workspace_id, g.workflow_id, g.version, g.key, ${t.payloadJson}::jsonb, ${t.maxAttempts}, ${t.now}, ${t.now}, ${t.now},
             ${tickSourceIdentity(t.triggerId, t.tick)}, ${t.trace.traceparent}, ${t.trace.tracestate}
      from g
      returning id
    )
    select id from r`.execute(db);
  return rows[0]?.id;
}
