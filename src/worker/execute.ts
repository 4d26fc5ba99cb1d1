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
import type { RunCheckpoint, StepRecord } from '../db/tables.ts';
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
import type { AttemptReads, Context } from '../steps/step.ts';

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

/**
 * The steps a run resumes after: the checkpoint's first records, each the succeeded record
 * of the step at its place in the version (a run keeps its version, so they always match).
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

export async function executeRun(env: StepEnv, run: ClaimedRun, retry: RetryPolicy): Promise<Outcome> {
  const ctx = runContext(run);
  // Steps a former attempt ran to success are not run again: their records and outputs come from the checkpoint.
  const records: StepRecord[] = resumed(run);
  for (const r of records) ctx.steps[r.key] = r.output;
  const tries: Record<string, number> = { ...run.checkpoint?.tries };
  // A step's own work saved by an earlier attempt (a paged call's pages), until the step succeeds.
  const progress: Record<string, unknown> = { ...run.checkpoint?.progress };
  const withProgress = (c: RunCheckpoint): RunCheckpoint => (Object.keys(progress).length === 0 ? c : { ...c, progress: { ...progress } });
  let progressLost = false;
  const reads: AttemptReads = { connectors: new Map() };
  const effects = env.effects ?? realEffects({ db: env.db, clock: env.clock, metrics: env.metrics, store: env.storeFacts });
  const iso = () => new Date(env.clock()).toISOString();
  let factsWritten = 0;
  const skipRest = (from: number, reason: string) => {
    for (const s of run.definition.slice(from))
      records.push({ key: s.key, status: 'skipped', started_at: null, finished_at: null, output: null, error: null, reason });
  };
  for (let i = records.length; i < run.definition.length; i++) {
    const step = run.definition[i]!;
    const startedAt = iso();
    const attempts = (tries[step.key] ?? 0) + 1;
    const span = env.trace?.child(`workflow.step ${step.type}`, 'internal', {
      'tributary.step.key': step.key,
      'tributary.step.type': step.type,
      'tributary.step.index': i,
      'tributary.run.attempt': run.attempt,
    });
    try {
      const type = stepTypeOf(step);
      // Unknown to this release, not by type but by data: a version saved by a later release may hold a type this one does not know.
      if (type === undefined) throw permanentFailure(`Steps of type ${step.type} cannot run in this release`);
      const checkpoint = env.checkpoint;
      const saveProgress =
        checkpoint &&
        (async (p: unknown) => {
          progress[step.key] = p;
          const ok = await checkpoint(withProgress({ steps: [...records], tries: { ...tries } }));
          if (!ok) progressLost = true;
          return ok;
        });
      const result = await type.run(
        step.config,
        {
          db: env.db,
          run,
          key: step.key,
          input: ctx,
          expressions: env.expressions,
          connectors: env.connectors,
          reads,
          span,
          progress: progress[step.key],
          saveProgress,
        },
        effects,
      );
      // Done: what it saved of its own work is its output now.
      delete progress[step.key];
      // Kept within the cap from here on: what the record keeps is what the later steps see.
      const kept = keptOutput(result.output, env.outputMaxBytes);
      const record: StepRecord = {
        key: step.key,
        status: 'succeeded',
        started_at: startedAt,
        finished_at: iso(),
        ...kept,
        error: null,
        attempt: run.attempt,
        attempts,
      };
      // A condition's value, before truthiness (nothing is shown as null).
      if ('value' in result) record.value = conditionValue(result.value);
      // A side effect is recorded before the next step starts, so a later step's retry does not repeat it. With no next step, the outcome records it.
      if (type.checkpoint === 'now' && env.checkpoint !== undefined && !result.stop && i + 1 < run.definition.length) {
        if (!(await env.checkpoint(withProgress({ steps: [...records, record], tries: { ...tries, [step.key]: attempts } })))) {
          span?.end();
          return { status: 'retrying', outcome: null, steps: records, error: null, factsWritten, leaseLost: true };
        }
      }
      tries[step.key] = attempts;
      factsWritten += result.factsWritten ?? 0;
      env.metrics?.stepAttempt(step.type, 'succeeded');
      span?.set({ 'tributary.step.outcome': 'succeeded' });
      span?.end();
      records.push(record);
      ctx.steps[step.key] = kept.output;
      if (result.state) ctx.state = result.state.value;
      if (result.stop) {
        skipRest(i + 1, result.stop.reason);
        return { status: 'succeeded', outcome: 'stopped_at_condition', steps: records, error: null, factsWritten };
      }
    } catch (err) {
      // The step stopped because its progress could not be recorded: the run is another attempt's now.
      if (progressLost) {
        span?.end();
        return { status: 'retrying', outcome: null, steps: records, error: null, factsWritten, leaseLost: true };
      }
      const failure = stepFailure(err);
      env.metrics?.stepAttempt(step.type, 'failed');
      // With the failed step's progress: its retry resumes its own work too (a paged call at its next page).
      const done: RunCheckpoint = withProgress({ steps: [...records], tries: { ...tries, [step.key]: attempts } });
      records.push({
        key: step.key,
        status: 'failed',
        started_at: startedAt,
        finished_at: iso(),
        output: null,
        error: failure.message,
        attempt: run.attempt,
        attempts,
      });
      skipRest(i + 1, `step ${step.key} failed`);
      const error = `Step ${step.key} failed: ${failure.message}`;
      // An error none of ours named is kept for the log, with its stack; the record says only that it happened.
      const unexpected = err instanceof WorkFailure || failure.transient ? undefined : err;
      const status = (err as { status?: unknown }).status;
      const failed = {
        step: step.key,
        code: unexpected !== undefined ? 'unexpected' : failure.transient ? 'transient' : 'permanent',
        message: failure.message,
        ...(typeof status === 'number' ? { status } : {}),
      };
      const common = { steps: records, error, factsWritten, failure: failed, ...(unexpected === undefined ? {} : { unexpected }) };
      span?.set({ 'tributary.step.outcome': 'failed', 'tributary.step.transient': failure.transient });
      span?.fail(failed.code, failureSummary(failure.message));
      span?.end();
      if (!failure.transient) return { status: 'failed', outcome: 'failed', ...common };
      // A transient failure on the last attempt: the run is given up, a dead letter.
      if (run.attempt >= run.max_attempts) return { status: 'failed', outcome: 'dead_letter', ...common };
      env.metrics?.stepRetry(step.type);
      const wait = retryDelayMs(run.attempt, retry, failure.retryAfterMs);
      // The next attempt resumes at this step: the ones before it (pure ones too) ride along with this outcome.
      return {
        status: 'retrying',
        outcome: null,
        ...common,
        runAt: new Date(env.clock() + wait),
        ...(env.checkpoint === undefined ? {} : { checkpoint: done }),
      };
    }
  }
  return { status: 'succeeded', outcome: 'completed', steps: records, error: null, factsWritten };
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
