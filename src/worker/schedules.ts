/**
 * Schedule triggers, fired by every process that runs the worker. Each process loads the
 * schedules of active workflows every second, sleeps until the earliest tick, and tries
 * to fire each due tick; the statement that fires ticks (triggers/schedule.sql.ts) lets
 * exactly one process make each tick's run, however many try.
 *
 * Which ticks a process tries, per schedule, with `prev` the instant up to which it has
 * already looked (its previous pass; at first sight, the later of its own start and the
 * schedule's since):
 * - the ticks after `prev` up to now (at most MAX_TICKS_PER_SCHEDULE): they came due
 *   since the previous pass, even when it is late;
 * - of the ticks before that not fired yet (missed while no process ran, while the
 *   database did not answer, or left by a pass's limits), catch_up `latest` fires the
 *   latest one and `none` none.
 *
 * A pass is bounded: at most `scheduleTicksPerPass` ticks, of which at most
 * `scheduleTicksPerWorkspace` of one workspace. The workspaces with due schedules take
 * turns, one schedule each per turn (and within a workspace the schedule served longest
 * ago first), so a workspace with thousands of schedules cannot starve another's one. A
 * schedule the pass does not reach is left behind: its due ticks count as missed and its
 * catch_up rule applies when its turn comes. The pass's ticks are fired a few hundred to
 * a statement, in turn order.
 */
import type { Deps } from '../deps.ts';
import { uuidv7 } from '../ids.ts';
import { storedContext, type TraceSpan } from '../tracing.ts';
import { latestTick, nextTick, ticksBetween } from '../triggers/schedule.ts';
import { fireTicks, loadSchedules, type ScheduleRow, type Tick } from '../triggers/schedule.sql.ts';
import { runConcurrency } from '../runs/concurrency.ts';
import { runStateKey } from '../runs/state-key.ts';
import { wakeWorkers } from '../runs/wake.ts';
import { timerDelay } from '../datetime.ts';

/** How often the schedules are loaded again: a schedule saved, changed or deactivated takes effect within this (and the pass after it). */
export const SCHEDULE_REFRESH_MS = 1000;
/** Ticks one schedule fires in one pass at most (a late process); older ones count as missed. */
export const MAX_TICKS_PER_SCHEDULE = 10;
/** Ticks fired by one statement. */
export const TICKS_PER_STATEMENT = 250;

export interface PassLimits {
  /** Ticks one pass fires at most (SCHEDULE_TICKS_PER_PASS). */
  perPass: number;
  /** Ticks of one workspace one pass fires at most (SCHEDULE_TICKS_PER_WORKSPACE). */
  perWorkspace: number;
}

interface Watched {
  row: ScheduleRow;
  prev: Date;
  /** The first tick after prev (null: none): a pass leaves the schedule alone until then. */
  next: Date | null;
  /** Unfired ticks at or before prev may remain (first sight, a failed tick, a pass's limits): the catch-up looks. */
  behind: boolean;
  /** When a pass last tried its ticks (ms; 0: never): within a workspace, the one served longest ago goes first. */
  served: number;
}

function watch(row: ScheduleRow, prev: Date, behind: boolean, served: number): Watched {
  return { row, prev, next: nextTick(row, prev), behind, served };
}

export interface ScheduleState {
  readonly started: Date;
  watched: Map<string, Watched>;
  /** Ticks could not be fired: logged once until one fires again. */
  failing: boolean;
  /** The workspace whose turn came last when a pass reached its limit: the next pass starts after it. */
  after: string;
}

export function scheduleState(started: Date): ScheduleState {
  return { started, watched: new Map(), failing: false, after: '' };
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
      next.set(row.id, watch(row, later(state.started, row.schedule_since), true, 0));
    }
  }
  state.watched = next;
}

/** The ticks to try now, oldest first, at most `max`. */
export function dueTicks(w: Pick<Watched, 'row' | 'prev' | 'behind'>, now: Date, max = MAX_TICKS_PER_SCHEDULE): Date[] {
  const s = w.row;
  if (max <= 0) return [];
  // A tick fires once (after the last fired one) and not before the schedule's since.
  const floor = later(new Date(s.schedule_since.getTime() - 1), s.last_tick_at);
  const recent = ticksBetween(s, later(floor, w.prev), now, Math.min(max, MAX_TICKS_PER_SCHEDULE));
  if (w.behind && s.catch_up === 'latest' && recent.length < max) {
    const missed = latestTick(s, w.prev.getTime() < now.getTime() ? w.prev : now);
    if (missed !== null && missed.getTime() > floor.getTime()) return [missed, ...recent];
  }
  return recent;
}

interface Planned {
  w: Watched;
  ticks: Date[];
  /** More ticks were due than it got: the rest count as missed. */
  capped: boolean;
}

/**
 * The pass's ticks in turn order: the workspaces with due schedules in rotation from the one
 * after `state.after`, one schedule each per turn, until the pass's or each workspace's limit.
 * Returns them and the schedules left for a later pass.
 */
export function planPass(state: ScheduleState, now: Date, limits: PassLimits): { planned: Planned[]; left: Watched[] } {
  const byWorkspace = new Map<string, Watched[]>();
  for (const w of state.watched.values()) {
    if (!w.behind && (w.next === null || w.next.getTime() > now.getTime())) continue;
    const list = byWorkspace.get(w.row.workspace_id);
    if (list === undefined) byWorkspace.set(w.row.workspace_id, [w]);
    else list.push(w);
  }
  const after = state.after;
  const order = [...byWorkspace.keys()].sort((a, b) => Number(a <= after) - Number(b <= after) || (a < b ? -1 : 1));
  const queues = order.map((ws) => ({
    ws,
    list: byWorkspace.get(ws)!.sort((a, b) => a.served - b.served || (a.row.id < b.row.id ? -1 : 1)),
    at: 0,
    budget: limits.perWorkspace,
  }));
  const planned: Planned[] = [];
  let total = limits.perPass;
  let active = queues.filter((q) => q.list.length > 0);
  while (total > 0 && active.length > 0) {
    for (const q of active) {
      if (total <= 0) break;
      const w = q.list[q.at++]!;
      const ticks = dueTicks(w, now, Math.min(q.budget, total));
      const last = ticks.at(-1);
      const capped = last !== undefined && (nextTick(w.row, last)?.getTime() ?? Infinity) <= now.getTime();
      planned.push({ w, ticks, capped });
      q.budget -= ticks.length;
      total -= ticks.length;
      if (total <= 0) state.after = q.ws;
    }
    active = active.filter((q) => q.at < q.list.length && q.budget > 0);
  }
  const reached = new Set(planned.map((p) => p.w));
  const left = queues.flatMap((q) => q.list.filter((w) => !reached.has(w)));
  return { planned, left };
}

/** One pass at `now`: tries the due ticks the pass's limits allow (planPass). Returns how many runs this process made. */
export async function schedulePass(deps: Deps, state: ScheduleState, now: Date, limits?: PassLimits): Promise<number> {
  const { planned, left } = planPass(state, now, limits ?? { perPass: deps.config.scheduleTicksPerPass, perWorkspace: deps.config.scheduleTicksPerWorkspace });
  // Not reached: its due ticks are missed ones now, caught up by its catch_up rule at its
  // turn. A schedule behind is tried at every pass, so it needs no next tick (and no cron
  // reading for each of thousands left).
  for (const w of left) {
    w.prev = now;
    w.behind = true;
    w.next = null;
  }
  let made = 0;
  let failed = false;
  const chunks: Planned[][] = [];
  let n = 0;
  for (const p of planned) {
    if (chunks.length === 0 || (n + p.ticks.length > TICKS_PER_STATEMENT && n > 0)) {
      chunks.push([]);
      n = 0;
    }
    chunks.at(-1)!.push(p);
    n += p.ticks.length;
  }
  for (const chunk of chunks) {
    const ticks: Tick[] = [];
    const spans = new Map<string, { span: TraceSpan | undefined; triggerId: string; workspaceId: string; tick: Date }>();
    if (!failed) {
      for (const p of chunk) {
        // A workspace past its waiting runs (QUOTA_WAITING_RUNS) loses the ticks, as missed
        // ones: firing them later would only add to the backlog that stopped it.
        if (p.ticks.length > 0 && !(await admitsTicks(deps, p.w.row, p.ticks))) {
          p.w.row.last_tick_at = p.ticks.at(-1)!;
          p.ticks = [];
        }
      }
      for (const { w, ticks: due } of chunk)
        for (const tick of due) {
          // The root of the run's trace. It is ended (and so sent) only when this process made
          // the run: of the processes that try one tick, the others leave theirs unsent.
          const span = deps.tracing.enabled
            ? deps.tracing.start('workflow.schedule_tick', 'producer', undefined, {
                'tributary.trigger.id': w.row.id,
                'tributary.schedule.tick': tick.toISOString(),
              })
            : undefined;
          const runId = uuidv7();
          spans.set(runId, { span, triggerId: w.row.id, workspaceId: w.row.workspace_id, tick });
          const payload = { scheduled_at: tick.toISOString(), fired_at: now.toISOString() };
          ticks.push({
            runId,
            triggerId: w.row.id,
            cron: w.row.cron,
            timezone: w.row.timezone,
            tick,
            payloadJson: JSON.stringify(payload),
            concurrencyKey: await tickKey(deps, w.row, payload),
            concurrency: w.row.concurrency ?? null,
            stateKey: await tickStateKey(deps, w.row, payload),
            stateKeyExpression: w.row.state_key ?? null,
            trace: storedContext(span),
          });
        }
      try {
        const ids = await fireTicks(deps.db, ticks, now, deps.config.runMaxAttempts);
        for (const id of ids) {
          const s = spans.get(id)!;
          deps.waitingRuns.queued(s.workspaceId);
          s.span?.set({ 'tributary.run.id': id });
          s.span?.end();
          made++;
          deps.log.debug({ trigger: s.triggerId, tick: s.tick.toISOString(), run: id }, 'schedule tick fired');
        }
        if (state.failing) deps.log.info('schedule ticks fire again');
        state.failing = false;
      } catch (err) {
        const first = ticks[0];
        if (!state.failing)
          deps.log.warn(
            { trigger: first?.triggerId, tick: first?.tick.toISOString(), ticks: ticks.length, err: { message: (err as Error).message } },
            'could not fire schedule ticks; later ones will be tried',
          );
        state.failing = true;
        failed = true;
      }
    }
    for (const { w, ticks: due, capped } of chunk) {
      // Fired here or by another process: either way it is behind us.
      const last = due.at(-1);
      if (!failed && last !== undefined) w.row.last_tick_at = last;
      Object.assign(w, watch(w.row, now, failed || capped, now.getTime()));
    }
  }
  if (made > 0) wakeWorkers(deps);
  return made;
}

/**
 * A tick's run's concurrency key (runs/concurrency.ts), over its payload (no delivery). A
 * tick is not held back for the expression pool's trouble: its run goes under the empty key.
 */
async function tickKey(deps: Deps, row: ScheduleRow, payload: unknown): Promise<string | null> {
  try {
    const found = await runConcurrency(deps.expressions, row.workspace_id, row.concurrency ?? null, payload, null);
    if (found?.problem !== undefined)
      deps.log.warn({ trigger: row.id, error: found.problem }, 'concurrency key expression failed; the run is under the empty key');
    return found?.key ?? null;
  } catch (err) {
    deps.log.warn({ trigger: row.id, err: { message: (err as Error).message } }, 'concurrency key could not be computed; the run is under the empty key');
    return '';
  }
}

/** A tick's run's state key (runs/state-key.ts), over its payload; as tickKey, never held back for the pool's trouble. */
async function tickStateKey(deps: Deps, row: ScheduleRow, payload: unknown): Promise<string | null> {
  try {
    const found = await runStateKey(deps.expressions, row.workspace_id, row.state_key ?? null, payload, null);
    if (found.problem !== undefined)
      deps.log.warn({ trigger: row.id, error: found.problem }, "state key expression failed; the run reads and writes the key ''");
    return found.key;
  } catch (err) {
    deps.log.warn({ trigger: row.id, err: { message: (err as Error).message } }, "state key could not be computed; the run reads and writes the key ''");
    return '';
  }
}

/** Whether the ticks' workspace may queue their runs; a refusal is logged and counted (quota_refusals_total). */
async function admitsTicks(deps: Deps, row: ScheduleRow, ticks: Date[]): Promise<boolean> {
  let admits: boolean;
  try {
    admits = await deps.waitingRuns.admits(row.workspace_id);
  } catch {
    return true; // the count could not be read: fireTicks meets the same database and decides
  }
  if (!admits) {
    deps.metrics.quotaRefusal('waiting_runs', 'schedule');
    deps.log.warn(
      { trigger: row.id, workspace: row.workspace_id, ticks: ticks.length, tick: ticks.at(-1)!.toISOString(), limit: deps.waitingRuns.limit },
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
