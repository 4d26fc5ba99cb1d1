/**
 * Executing one attempt of a run: its steps in order, each with its record. Expressions
 * see `{payload, steps: {key: output}, run: {id, attempt}, trigger: {key}, delivery: {id, headers} | null}`
 * (a write_fact with for_each adds `item` and `index`); every step type reads the one context.
 * Each step is run by its type (steps/index.ts) against the attempt's effects: a run's real
 * ones, or a test run's dry ones (steps/effects.ts).
 *
 * A step fails permanently on what a retry cannot change and transiently on what it can:
 * the run then retries with backoff until its attempts are spent.
 */
import type { Metrics } from '../metrics.ts';
import type { Db } from '../db/connect.ts';
import type { RunCheckpoint, StepRecord, WorkflowStep } from '../db/tables.ts';
import { failureSummary, isDatabaseUnavailable, isTransientDatabaseError, permanentFailure, WorkFailure } from '../errors.ts';
import type { FactStore } from '../facts/write.ts';
import type { ExpressionPool } from '../expressions/expression-pool.ts';
import type { ClaimedRun, Outcome } from '../runs/queue.sql.ts';
import type { ConnectorRuntime } from '../connectors/runtime.ts';
import { cutText, keptOutput } from '../runs/run-record.ts';
import type { TraceSpan } from '../tracing.ts';
import { expressionDelivery } from '../triggers/delivery-headers.ts';
import { realEffects, type Effects } from '../steps/effects.ts';
import { stepTypeOf } from '../steps/index.ts';
import type { AttemptReads, Context, ListResult, NestedWalk, Park } from '../steps/step.ts';

export { truthy } from '../steps/condition.ts';
export { sourceKey, MAX_FOR_EACH_ITEMS } from '../steps/write-fact.ts';
export type { Context } from '../steps/step.ts';

export interface StepEnv {
  db: Db;
  clock: () => number;
  /** Outbound calls (http_request); absent where no step calls out. */
  connectors?: ConnectorRuntime;
  expressions: ExpressionPool;
  /** What the steps do to the world: a test run's dry effects (steps/effects.ts); a run's real ones when absent. */
  effects?: Effects;
  /** Where steps and facts are counted; absent in a test run, which is no run. */
  metrics?: Pick<Metrics, 'stepAttempt' | 'stepRetry' | 'factsWritten'>;
  /** The attempt's span (tracing.ts): each step's span is its child; undefined when tracing is off. */
  trace?: TraceSpan | undefined;
  /** Where a run's write_fact stores: the worker's fact writer (batches concurrent runs); one statement per step when absent. */
  storeFacts?: FactStore;
  /**
   * Records what the attempt has done before its next step starts, fenced by the run's lease
   * (runs/queue.sql.ts checkpointRuns, batched by the worker); false when the lease was lost. Absent in a test run.
   */
  checkpoint?: (checkpoint: RunCheckpoint) => Promise<boolean>;
  /** A step output past this (as JSON, RUN_STEP_OUTPUT_MAX_BYTES) is kept as its preview, for the record and the later steps (run-record.ts keptOutput). */
  outputMaxBytes: number;
}

/** When a failed attempt is tried again (RUN_RETRY_SCHEDULE, RUN_RETRY_AFTER_MAX). */
export interface RetryPolicy {
  /** Delays before the 2nd, 3rd, ... attempt; attempts past the list wait its last entry. */
  readonly schedule: readonly number[];
  /** The longest a provider's Retry-After may hold a run back. */
  readonly retryAfterMaxMs: number;
}

/** Jitter: up to this share of the delay is added, so runs failed together do not all come back at once. */
export const RETRY_JITTER = 0.1;

/** Delay before attempt `attempt + 1`: the schedule's entry for it, plus up to 10% jitter; never shorter than the entry. */
export function backoffMs(attempt: number, schedule: readonly number[], random: () => number = Math.random): number {
  const base = schedule[Math.min(Math.max(0, attempt - 1), schedule.length - 1)]!;
  return Math.round(base + random() * base * RETRY_JITTER);
}

/** The wait before the next attempt: the schedule's, or a provider's Retry-After when longer (up to its cap). */
export function retryDelayMs(attempt: number, retry: RetryPolicy, retryAfterMs: number | undefined, random: () => number = Math.random): number {
  return Math.max(backoffMs(attempt, retry.schedule, random), Math.min(retry.retryAfterMaxMs, retryAfterMs ?? 0));
}

/** What a run's expressions see before its first step (a test run shows it as each step's input). */
export function runContext(run: ClaimedRun): Context {
  return {
    payload: run.payload,
    steps: {},
    run: { id: run.id, attempt: run.attempt },
    trigger: { key: run.trigger_key },
    delivery: expressionDelivery(run.delivery_id, run.delivery_headers),
    state: run.state ?? null,
  };
}

/** The records of finished for_each items a for_each's record keeps (besides a failed one); the others are counted. */
export const ITEM_RECORDS_SHOWN = 10;

/**
 * The top-level steps a run resumes after: the checkpoint's first records, each the
 * succeeded record of the step at its place in the version (a run keeps its version, so
 * they always match).
 */
function resumed(run: ClaimedRun): StepRecord[] {
  const done: StepRecord[] = [];
  for (const r of run.checkpoint?.steps ?? []) {
    const step = run.definition[done.length];
    if (step === undefined || step.key !== r.key || r.status !== 'succeeded') break;
    done.push(r);
  }
  return done;
}

/** The attempt's lease was lost at a checkpoint: another worker holds the run, nothing more is done or recorded. */
class LeaseLost extends Error {}

/** A step parked the run; `record` is the parked step's (or the switch's holding it). */
class Parked extends Error {
  readonly park: Park;
  /** The parked step's type, and whether it had parked the run before (a wait resumed early parks again). */
  readonly kind: string;
  readonly again: boolean;
  constructor(park: Park, kind: string, again: boolean) {
    super('parked');
    this.park = park;
    this.kind = kind;
    this.again = again;
  }
}

/** A step failed: the innermost failing step's key and failure, through the steps that hold it. */
class StepFailed extends Error {
  readonly failure: WorkFailure;
  readonly key: string;
  readonly original: unknown;
  constructor(failure: WorkFailure, key: string, original: unknown) {
    super(failure.message);
    this.failure = failure;
    this.key = key;
    this.original = original;
  }
}

interface Scope {
  /** Prefix of its steps' instances: '' at the top and in a branch there, `<for_each key>[<index>].` in an item. */
  prefix: string;
  /** The run's own list (its records are the checkpoint's `steps`), not a nested one. */
  top: boolean;
  span: TraceSpan | undefined;
}

/**
 * One attempt's walk over the step tree. What has succeeded is kept by step instance (keys
 * are unique across the workflow; an item's steps are told apart by the item's index):
 * top-level records in order, nested ones in a map, and what steps saved of their progress
 * (a switch's branch, a for_each's finished items). A checkpoint writes all of it.
 */
class Walk {
  readonly records: StepRecord[] = [];
  private readonly resumedTop: Map<string, StepRecord>;
  private readonly nested: Record<string, StepRecord>;
  private readonly progress: Record<string, unknown>;
  private readonly tries: Record<string, number>;
  private parked: RunCheckpoint['parked'];
  failing: RunCheckpoint['failing'];
  /** The workflow's state as the attempt's steps see it: as claimed, then as each set_state sets it (an item's copy of the context included). */
  private state: unknown;
  factsWritten = 0;
  private lost = false;
  private chain: Promise<boolean> = Promise.resolve(true);
  private queued: Promise<boolean> | undefined;
  private readonly reads: AttemptReads = { connectors: new Map() };

  private readonly env: StepEnv;
  private readonly run: ClaimedRun;
  private readonly effects: Effects;

  constructor(env: StepEnv, run: ClaimedRun, effects: Effects) {
    this.env = env;
    this.run = run;
    this.effects = effects;
    const cp = run.checkpoint ?? undefined;
    this.resumedTop = new Map(resumed(run).map((r) => [r.key, r]));
    this.nested = { ...cp?.nested };
    this.progress = { ...cp?.progress };
    this.tries = { ...cp?.tries };
    this.parked = cp?.parked;
    this.failing = cp?.failing;
    this.state = run.state ?? null;
  }

  /** What a later attempt resumes after. */
  snapshot(): RunCheckpoint {
    const cp: RunCheckpoint = {
      // Once on_failure runs, the run's own records are final: all of them are kept.
      steps: this.failing ? this.records : this.records.filter((r) => r.status === 'succeeded'),
      tries: { ...this.tries },
    };
    if (Object.keys(this.nested).length > 0) cp.nested = { ...this.nested };
    if (Object.keys(this.progress).length > 0) cp.progress = { ...this.progress };
    if (this.parked !== undefined) cp.parked = this.parked;
    if (this.failing !== undefined) cp.failing = this.failing;
    return cp;
  }

  /**
   * Checkpoints now, fenced by the lease: one write at a time per attempt (two of one run in
   * one batch would race), each writing the newest state; callers that come while one is
   * queued share it.
   */
  save(): Promise<boolean> {
    const write = this.env.checkpoint;
    if (write === undefined) return Promise.resolve(true);
    if (this.queued !== undefined) return this.queued;
    const q = this.chain.then(async (ok) => {
      this.queued = undefined;
      if (!ok || this.lost) return false;
      const kept = await write(this.snapshot());
      if (!kept) this.lost = true;
      return kept;
    });
    this.queued = q;
    this.chain = q.catch(() => false);
    return q;
  }

  private iso = () => new Date(this.env.clock()).toISOString();

  private skipRest(steps: readonly WorkflowStep[], from: number, out: StepRecord[], reason: string): void {
    for (const s of steps.slice(from)) out.push({ key: s.key, status: 'skipped', started_at: null, finished_at: null, output: null, error: null, reason });
  }

  /** Runs a list of steps in order, each record appended to `out`. A false condition stops the list; a failure, a park or a lost lease throws. */
  async list(steps: readonly WorkflowStep[], scope: Scope, input: Context, out: StepRecord[]): Promise<ListResult> {
    let output: unknown = null;
    for (let i = 0; i < steps.length; i++) {
      const step = steps[i]!;
      if (this.lost) throw new LeaseLost();
      const done = scope.top ? this.resumedTop.get(step.key) : this.nested[scope.prefix + step.key];
      let record: StepRecord;
      let stop: string | undefined;
      if (done?.status === 'succeeded') {
        // Ran to success by a former attempt: not run again; its record and output come from the checkpoint.
        record = done;
        out.push(record);
        if (step.type === 'condition' && record.output === false) stop = `condition false at step ${step.key}`;
      } else {
        try {
          ({ record, stop } = await this.one(step, scope, input, out, scope.top && i + 1 < steps.length));
        } catch (err) {
          if (err instanceof StepFailed) this.skipRest(steps, i + 1, out, `step ${step.key} failed`);
          throw err;
        }
      }
      input.steps[step.key] = record.output;
      output = record.output;
      if (stop !== undefined) {
        this.skipRest(steps, i + 1, out, stop);
        return { output: null, stopped: stop };
      }
    }
    return { output };
  }

  private nestedWalk(scope: Scope): NestedWalk {
    const base = scope.prefix;
    return {
      list: (steps, opts) => this.list(steps, { prefix: base + opts.prefix, top: false, span: opts.span }, opts.input, opts.into),
      forget: (prefix) => {
        const p = base + prefix;
        for (const k of Object.keys(this.nested)) if (k.startsWith(p)) delete this.nested[k];
        for (const k of Object.keys(this.progress)) if (k.startsWith(p)) delete this.progress[k];
        for (const k of Object.keys(this.tries)) if (k.startsWith(p)) delete this.tries[k];
      },
      itemRecordsShown: ITEM_RECORDS_SHOWN,
    };
  }

  /** Runs one step: its record is appended to `out` whatever happens (succeeded, failed, waiting). */
  private async one(step: WorkflowStep, scope: Scope, input: Context, out: StepRecord[], moreFollow: boolean): Promise<{ record: StepRecord; stop?: string }> {
    const { env, run } = this;
    const instance = scope.prefix + step.key;
    const startedAt = this.iso();
    const attempts = (this.tries[instance] ?? 0) + 1;
    const span = scope.span?.child(`workflow.step ${step.type}`, 'internal', {
      'tributary.step.key': step.key,
      'tributary.step.type': step.type,
      'tributary.step.instance': instance,
      'tributary.run.attempt': run.attempt,
    });
    const extra: Partial<StepRecord> = {};
    const type = stepTypeOf(step);
    try {
      // Unknown to this release, not by type but by data: a version saved by a later release may hold a type this one does not know.
      if (type === undefined) throw permanentFailure(`Steps of type ${step.type} cannot run in this release`);
      const parked = this.parked?.key === instance ? this.parked : undefined;
      // A matched delivery is the run's run_waits row, read in the claim (runs/queue.sql.ts); the checkpoint's own is a test run's.
      const delivery = parked === undefined ? undefined : (parked.delivery ?? run.wait_delivery ?? undefined);
      input.state = this.state;
      const result = await type.run(
        step.config,
        {
          db: env.db,
          run,
          key: step.key,
          instance,
          input,
          expressions: env.expressions,
          connectors: env.connectors,
          reads: this.reads,
          span,
          progress: this.progress[instance],
          noteProgress: (p) => {
            this.progress[instance] = p;
          },
          ...(env.checkpoint === undefined
            ? {}
            : {
                saveProgress: (p: unknown) => {
                  this.progress[instance] = p;
                  return this.save();
                },
              }),
          clock: env.clock,
          outputMaxBytes: env.outputMaxBytes,
          ...(parked === undefined ? {} : { parked: { state: parked.state, ...(delivery === undefined ? {} : { delivery }) } }),
          record: extra,
          nested: this.nestedWalk(scope),
        },
        this.effects,
      );
      if (parked !== undefined) this.parked = undefined;
      if (result.state) this.state = result.state.value;
      if (result.park) {
        this.parked = { key: instance, state: result.park.state };
        span?.set({ 'tributary.step.resume_at': result.park.resumeAt.toISOString() });
        throw new Parked(result.park, step.type, parked !== undefined);
      }
      // Kept within the cap from here on: what the record keeps is what the later steps see.
      const kept = result.outputCut
        ? { output: result.output, output_truncated: true as const, output_bytes: result.outputCut.bytes }
        : keptOutput(result.output, env.outputMaxBytes);
      const record: StepRecord = {
        key: step.key,
        status: 'succeeded',
        started_at: startedAt,
        finished_at: this.iso(),
        ...kept,
        error: null,
        attempt: run.attempt,
        attempts,
        ...extra,
      };
      // A condition's value, before truthiness (nothing is shown as null).
      if ('value' in result) record.value = conditionValue(result.value);
      this.tries[instance] = attempts;
      // Its progress is in its record now (a switch's branch), or done with (a for_each's items).
      delete this.progress[instance];
      if (!scope.top) this.nested[instance] = record;
      out.push(record);
      // A side effect is recorded before the next step starts, so a later step's retry does not repeat it. With no next step, the outcome records it.
      if (type.checkpoint === 'now' && env.checkpoint !== undefined && !result.stop && (moreFollow || !scope.top)) {
        if (!(await this.save())) throw new LeaseLost();
      }
      this.factsWritten += result.factsWritten ?? 0;
      env.metrics?.stepAttempt(step.type, 'succeeded');
      span?.set({ 'tributary.step.outcome': 'succeeded' });
      span?.end();
      return { record, ...(result.stop ? { stop: result.stop.reason } : {}) };
    } catch (err) {
      if (err instanceof LeaseLost) {
        span?.end();
        throw err;
      }
      if (err instanceof Parked) {
        // This step, or a step of its branch, waits: its record says so, with what ran of the branch.
        out.push({ key: step.key, status: 'waiting', started_at: startedAt, finished_at: null, output: null, error: null, attempt: run.attempt, ...extra });
        span?.set({ 'tributary.step.outcome': 'waiting' });
        span?.end();
        throw err;
      }
      const inner = err instanceof StepFailed ? err : undefined;
      const failure = inner?.failure ?? stepFailure(err);
      this.tries[instance] = attempts;
      if (inner === undefined) env.metrics?.stepAttempt(step.type, 'failed');
      out.push({
        key: step.key,
        status: 'failed',
        started_at: startedAt,
        finished_at: this.iso(),
        output: null,
        error: inner === undefined ? failure.message : `Step ${inner.key} failed: ${failure.message}`,
        attempt: run.attempt,
        attempts,
        ...extra,
      });
      const unexpected = err instanceof WorkFailure || failure.transient ? undefined : err;
      span?.set({ 'tributary.step.outcome': 'failed', 'tributary.step.transient': failure.transient });
      span?.fail(unexpected !== undefined ? 'unexpected' : failure.transient ? 'transient' : 'permanent', failureSummary(failure.message));
      span?.end();
      throw inner ?? new StepFailed(failure, step.key, err);
    }
  }
}

export async function executeRun(env: StepEnv, run: ClaimedRun, retry: RetryPolicy): Promise<Outcome> {
  const ctx = runContext(run);
  const effects = env.effects ?? realEffects({ db: env.db, clock: env.clock, metrics: env.metrics, store: env.storeFacts });
  const walk = new Walk(env, run, effects);
  const top: Scope = { prefix: '', top: true, span: env.trace };
  const base = { steps: walk.records, error: null };
  if (walk.failing !== undefined) {
    // A former attempt had failed for good and started the on_failure steps: the run's own steps are final, only those go on.
    walk.records.push(...(run.checkpoint?.steps ?? []));
    for (const r of walk.records) if (r.status === 'succeeded') ctx.steps[r.key] = r.output;
    // Set by the sweeper (runs/queue.sql.ts reclaimExpired), whose checkpoint has only the successes: the step it lost is the failed one.
    if (!walk.records.some((r) => r.status === 'failed')) {
      const had = new Set(walk.records.map((r) => r.key));
      for (const s of run.definition) {
        if (had.has(s.key)) continue;
        const lost = s.key === walk.failing.step;
        walk.records.push({
          key: s.key,
          status: lost ? 'failed' : 'skipped',
          started_at: null,
          finished_at: lost ? new Date(env.clock()).toISOString() : null,
          output: null,
          error: lost ? walk.failing.message : null,
          ...(lost ? {} : { reason: `step ${walk.failing.step} failed` }),
        });
      }
    }
    return onFailure(env, run, walk, ctx, walk.failing);
  }
  try {
    const r = await walk.list(run.definition, top, ctx, walk.records);
    const outcome = r.stopped === undefined ? 'completed' : 'stopped_at_condition';
    return { status: 'succeeded', outcome, ...base, factsWritten: walk.factsWritten };
  } catch (err) {
    if (err instanceof LeaseLost) return { status: 'retrying', outcome: null, ...base, factsWritten: walk.factsWritten, leaseLost: true };
    if (err instanceof Parked) {
      const cp = walk.snapshot();
      return {
        status: 'waiting',
        outcome: null,
        ...base,
        factsWritten: walk.factsWritten,
        runAt: err.park.resumeAt,
        checkpoint: cp,
        wait: { kind: err.kind, resumed: err.again, ...(err.park.delivery ? { delivery: err.park.delivery } : {}) },
      };
    }
    if (!(err instanceof StepFailed)) throw err;
    const failure = err.failure;
    const error = `Step ${err.key} failed: ${failure.message}`;
    // An error none of ours named is kept for the log, with its stack; the record says only that it happened.
    const unexpected = err.original instanceof WorkFailure || failure.transient ? undefined : err.original;
    const status = (err.original as { status?: unknown } | null)?.status;
    const failed = {
      step: err.key,
      code: unexpected !== undefined ? 'unexpected' : failure.transient ? 'transient' : 'permanent',
      message: failure.message,
      ...(typeof status === 'number' ? { status } : {}),
    };
    const common = { steps: walk.records, error, factsWritten: walk.factsWritten, failure: failed, ...(unexpected === undefined ? {} : { unexpected }) };
    if (failure.transient && run.attempt < run.max_attempts) {
      const type = stepTypeOf(findStep(run.definition, err.key) ?? ({ type: 'unknown' } as unknown as WorkflowStep));
      env.metrics?.stepRetry(type?.type ?? 'unknown');
      const wait = retryDelayMs(run.attempt, retry, failure.retryAfterMs);
      // The next attempt resumes at this step: the ones before it (pure ones too) ride along with this outcome.
      return {
        status: 'retrying',
        outcome: null,
        ...common,
        runAt: new Date(env.clock() + wait),
        ...(env.checkpoint === undefined ? {} : { checkpoint: walk.snapshot() }),
      };
    }
    // A permanent failure, or a transient one on the last attempt (a dead letter): the run fails for good.
    const failing = { step: err.key, error, outcome: failure.transient ? ('dead_letter' as const) : ('failed' as const), message: failure.message };
    const done = await onFailure(env, run, walk, ctx, failing);
    return { ...done, ...common, steps: done.steps, ...(done.leaseLost ? { status: 'retrying', outcome: null, leaseLost: true } : {}) };
  }
}

/**
 * The workflow's on_failure steps, once the run has failed for good: they see the failed
 * step's key and error as `failure`, and the steps that succeeded. Their records follow the
 * run's own on the run, each marked `on_failure`; a failing one is recorded and the run
 * stays failed (its on_failure steps do not run again, nor are they retried).
 */
async function onFailure(env: StepEnv, run: ClaimedRun, walk: Walk, ctx: Context, failing: NonNullable<RunCheckpoint['failing']>): Promise<Outcome> {
  const list = run.on_failure ?? [];
  const result = (steps: StepRecord[]): Outcome => ({
    status: 'failed',
    outcome: failing.outcome,
    steps,
    error: failing.error,
    factsWritten: walk.factsWritten,
  });
  if (list.length === 0) return result(walk.records);
  walk.failing = failing;
  const into: StepRecord[] = [];
  const span = env.trace?.child('workflow.on_failure', 'internal', { 'tributary.failure.step': failing.step });
  try {
    await walk.list(list, { prefix: '', top: false, span }, { ...ctx, steps: { ...ctx.steps }, failure: { step: failing.step, error: failing.message } }, into);
  } catch (err) {
    if (err instanceof LeaseLost) {
      span?.end();
      return { ...result(walk.records), status: 'retrying', outcome: null, leaseLost: true };
    }
    // A failing on_failure step is recorded (in `into`), not retried: the run stays failed.
    if (!(err instanceof StepFailed) && !(err instanceof Parked)) {
      span?.end();
      throw err;
    }
  }
  span?.end();
  return result([...walk.records, ...into.map((r) => ({ ...r, on_failure: true as const }))]);
}

/** A step anywhere in the tree, by key (keys are unique across the workflow). */
export function findStep(steps: readonly WorkflowStep[], key: string): WorkflowStep | undefined {
  for (const s of steps) {
    if (s.key === key) return s;
    for (const l of stepTypeOf(s)?.describe(s.config).lists ?? []) {
      const found = findStep(l.steps, key);
      if (found) return found;
    }
  }
  return undefined;
}

/** A condition's value as its record keeps it: whole when small, else the start of its JSON (a condition's value is for reading, not a store). */
const CONDITION_VALUE_MAX_BYTES = 1024;
function conditionValue(v: unknown): unknown {
  if (v === undefined) return null;
  const json = JSON.stringify(v) ?? 'null';
  if (Buffer.byteLength(json) <= CONDITION_VALUE_MAX_BYTES) return v;
  return cutText(json, CONDITION_VALUE_MAX_BYTES, ` ... [cut: ${Buffer.byteLength(json)} bytes]`);
}

/**
 * Whatever a step threw, in the worker's one vocabulary: the failures of steps and connectors
 * as they are, the database unreachable, busy or in conflict as transient, anything else as
 * a permanent failure that keeps the error as its cause.
 */
export function stepFailure(err: unknown): WorkFailure {
  if (err instanceof WorkFailure) return err;
  if (isDatabaseUnavailable(err)) return new WorkFailure('The database was unavailable', { transient: true, cause: err });
  if (isTransientDatabaseError(err)) return new WorkFailure('The database refused the step for now', { transient: true, cause: err });
  return new WorkFailure('The step failed unexpectedly', { transient: false, cause: err });
}
