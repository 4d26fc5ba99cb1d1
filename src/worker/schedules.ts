/**
 * Schedule triggers, fired by every process that runs the worker. Each process loads the
 * schedules of active workflows every few seconds, sleeps until the earliest tick, and
 * tries to fire each due tick; the statement that fires it (workflows/schedule.sql.ts)
 * lets exactly one process make the tick's run, however many try.
 *
 * Which ticks a process tries, per schedule, with `prev` the instant up to which it has
 * already looked (its previous pass; at first sight, the later of its own start and the
 * schedule's since):
 * - every tick after `prev` up to now: they came due while it ran, even when it is late;
 * - of the ticks before that not fired yet (missed while no process ran, or while the
 *   database did not answer), catch_up `latest` fires the latest one and `none` none.
 */
import type { Deps } from '../deps.ts';
import { uuidv7 } from '../ids.ts';
import { storedContext } from '../tracing.ts';
import { latestTick, nextTick, ticksBetween } from '../workflows/schedule.ts';
import { fireTick, loadSchedules, type ScheduleRow } from '../workflows/schedule.sql.ts';
import { wakeWorkers } from '../workflows/wake.ts';
import { timerDelay } from '../datetime.ts';

/** How often the schedules are loaded again: a schedule saved, changed or deactivated takes effect within this. */
export const SCHEDULE_REFRESH_MS = 2000;
/** Ticks one schedule fires in one pass at most; the rest count as missed at the next. */
export const MAX_TICKS_PER_PASS = 100;

interface Watched {
  row: ScheduleRow;
  prev: Date;
  /** The first tick after prev (null: none): a pass leaves the schedule alone until then. */
  next: Date | null;
  /** Unfired ticks at or before prev may remain (first sight, a failed tick, the cap of a pass): the catch-up looks. */
  behind: boolean;
}

function watch(row: ScheduleRow, prev: Date, behind: boolean): Watched {
  return { row, prev, next: nextTick(row, prev), behind };
}

export interface ScheduleState {
  readonly started: Date;
  watched: Map<string, Watched>;
  /** Ticks could not be fired: logged once until one fires again. */
  failing: boolean;
}

export function scheduleState(started: Date): ScheduleState {
  return { started, watched: new Map(), failing: false };
}

const later = (a: Date, b: Date | null): Date => (b !== null && b.getTime() > a.getTime() ? b : a);

/** The watched schedules made those loaded; one changed since (or activated again) is watched afresh. */
export function refreshSchedules(state: ScheduleState, rows: ScheduleRow[]): void {
  const next = new Map<string, Watched>();
  for (const row of rows) {
    const old = state.watched.get(row.id);
    const same =
      old !== undefined && old.row.cron === row.cron && old.row.timezone === row.timezone && old.row.schedule_since.getTime() === row.schedule_since.getTime();
    if (same) {
      const last = old.row.last_tick_at === null ? row.last_tick_at : later(old.row.last_tick_at, row.last_tick_at);
      next.set(row.id, { ...old, row: { ...row, last_tick_at: last } });
    } else {
      next.set(row.id, watch(row, later(state.started, row.schedule_since), true));
    }
  }
  state.watched = next;
}

/** The ticks to try now, oldest first. */
export function dueTicks(w: Watched, now: Date): Date[] {
  const s = w.row;
  // A tick fires once (after the last fired one) and not before the schedule's since.
  const floor = later(new Date(s.schedule_since.getTime() - 1), s.last_tick_at);
  const out: Date[] = [];
  if (w.behind && s.catch_up === 'latest') {
    const missed = latestTick(s, w.prev.getTime() < now.getTime() ? w.prev : now);
    if (missed !== null && missed.getTime() > floor.getTime()) out.push(missed);
  }
  return out.concat(ticksBetween(s, later(floor, w.prev), now, MAX_TICKS_PER_PASS));
}

/** One pass at `now`: tries every due tick of every watched schedule. Returns how many runs this process made. */
export async function schedulePass(deps: Deps, state: ScheduleState, now: Date): Promise<number> {
  let made = 0;
  for (const w of state.watched.values()) {
    if (!w.behind && (w.next === null || w.next.getTime() > now.getTime())) continue;
    const ticks = dueTicks(w, now);
    let failed = false;
    for (const tick of ticks) {
      // A workspace past its waiting runs (QUOTA_WAITING_RUNS) loses the tick, as a missed
      // one: firing it later would only add to the backlog that stopped it.
      if (!(await admitsTick(deps, w.row, tick))) {
        w.row.last_tick_at = tick;
        continue;
      }
      // The root of the run's trace. It is ended (and so sent) only when this process made
      // the run: of the processes that try one tick, the others leave theirs unsent.
      const span = deps.tracing.enabled
        ? deps.tracing.start('workflow.schedule_tick', 'producer', undefined, {
            'tributary.trigger.id': w.row.id,
            'tributary.schedule.tick': tick.toISOString(),
          })
        : undefined;
      try {
        const id = await fireTick(deps.db, {
          trace: storedContext(span),
          runId: uuidv7(),
          triggerId: w.row.id,
          cron: w.row.cron,
          timezone: w.row.timezone,
          tick,
          now,
          payloadJson: JSON.stringify({ scheduled_at: tick.toISOString(), fired_at: now.toISOString() }),
          maxAttempts: deps.config.runMaxAttempts,
        });
        if (id !== undefined) {
          deps.waitingRuns.queued(w.row.workspace_id);
          span?.set({ 'tributary.run.id': id });
          span?.end();
          made++;
          deps.log.debug({ trigger: w.row.id, tick: tick.toISOString(), run: id }, 'schedule tick fired');
        }
        // Fired here or by another process: either way it is behind us.
        w.row.last_tick_at = tick;
        if (state.failing) deps.log.info('schedule ticks fire again');
        state.failing = false;
      } catch (err) {
        if (!state.failing)
          deps.log.warn(
            { trigger: w.row.id, tick: tick.toISOString(), err: { message: (err as Error).message } },
            'could not fire a schedule tick; later ones will be tried',
          );
        state.failing = true;
        failed = true;
        break;
      }
    }
    const last = ticks.at(-1);
    const capped = last !== undefined && (nextTick(w.row, last)?.getTime() ?? Infinity) <= now.getTime();
    Object.assign(w, watch(w.row, now, failed || capped));
  }
  if (made > 0) wakeWorkers(deps);
  return made;
}

/** Whether the tick's workspace may queue its run; a refusal is logged and counted (quota_refusals_total). */
async function admitsTick(deps: Deps, row: ScheduleRow, tick: Date): Promise<boolean> {
  let admits: boolean;
  try {
    admits = await deps.waitingRuns.admits(row.workspace_id);
  } catch {
    return true; // the count could not be read: fireTick meets the same database and decides
  }
  if (!admits) {
    deps.metrics.quotaRefusal('waiting_runs', 'schedule');
    deps.log.warn(
      { trigger: row.id, workspace: row.workspace_id, tick: tick.toISOString(), limit: deps.waitingRuns.limit },
      'schedule tick skipped: the workspace has its limit of waiting runs (QUOTA_WAITING_RUNS)',
    );
  }
  return admits;
}

export interface ScheduleLoop {
  stop(): Promise<void>;
}

export function startSchedules(deps: Deps): ScheduleLoop {
  const state = scheduleState(new Date(deps.clock()));
  let loadedAt = -Infinity;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> = Promise.resolve();
  let stopped = false;
  let loadFailing = false;

  const arm = () => {
    if (stopped) return;
    const now = new Date(deps.clock());
    let due = new Date(loadedAt + SCHEDULE_REFRESH_MS);
    for (const w of state.watched.values()) if (w.next !== null && w.next.getTime() < due.getTime()) due = w.next;
    timer = setTimeout(() => (running = pass()), timerDelay(due, now));
    timer.unref();
  };

  const pass = async () => {
    try {
      if (deps.clock() >= loadedAt + SCHEDULE_REFRESH_MS) {
        try {
          refreshSchedules(state, await loadSchedules(deps.db));
          if (loadFailing) deps.log.info('schedules load again');
          loadFailing = false;
        } catch (err) {
          if (!loadFailing) deps.log.warn({ err: { message: (err as Error).message } }, 'cannot load schedules; retrying');
          loadFailing = true;
        }
        loadedAt = deps.clock();
      }
      if (!stopped) await schedulePass(deps, state, new Date(deps.clock()));
    } catch (err) {
      deps.log.error({ err }, 'schedule pass failed');
    } finally {
      arm();
    }
  };

  running = pass();
  return {
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}
