/**
 * The worker: claims runs in batches up to WORKER_CONCURRENCY, executes them, keeps their
 * leases alive with a heartbeat and records each attempt's outcome. It wakes at once when
 * a run is queued: in-process (the webhook surface and replay signal it), by LISTEN/NOTIFY
 * from other processes on PostgreSQL, and by polling every WORKER_POLL_MS as the fallback.
 *
 * Stopping: no new claims; running attempts may finish within the grace period; those
 * still running then are released back to the queue (their attempt not counted) and
 * whatever they would still write is refused, since they no longer hold the lease.
 */
import os from 'node:os';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import type { Deps } from '../deps.ts';
import {
  checkpointRuns,
  claimBatch,
  FIRST_KEYED,
  FIRST_WORKSPACE,
  finishRuns,
  heartbeat,
  reclaimExpired,
  releaseRuns,
  type ClaimedRun,
  type Outcome,
} from '../runs/queue.sql.ts';
import { NOTIFY_CHANNEL } from '../runs/notify.sql.ts';
import { executeRun } from './execute.ts';
import { factWriter, type FactWriter } from '../facts/fact-writer.ts';
import { capRecord, traceIdOf } from '../runs/run-record.ts';
import { failureSummary } from '../errors.ts';
import type { TraceSpan, Tracing } from '../tracing.ts';
import type { RunCheckpoint } from '../db/tables.ts';

export interface Worker {
  readonly id: string;
  stop(graceMs?: number): Promise<void>;
  /** Runs being executed now. */
  inFlight(): number;
}

/** What the parts of one worker share: its id, its lease, the runs it executes, and whether it is stopping. */
interface WorkerState {
  readonly id: string;
  readonly leaseMs: number;
  readonly running: Map<string, Promise<void>>;
  stopping: boolean;
}

type RecordOutcome = (run: ClaimedRun, outcome: Outcome) => Promise<void>;

/**
 * The outcome recorder. Outcomes are recorded in batches, like a group commit: while one
 * statement records some, the outcomes that finish meanwhile wait and go together in the
 * next. The promise settles once the run's outcome is recorded, refused or given up.
 */
function outcomeRecorder(deps: Deps, w: WorkerState): RecordOutcome {
  const { log } = deps;
  const add = groupCommit<{ id: string; attempt: number; run: ClaimedRun; outcome: Outcome; recorded: () => void; giveUpAt?: number }>(async (batch) => {
    try {
      const finishedAt = deps.clock();
      const kept = await finishRuns(deps.db, w.id, batch, new Date(finishedAt));
      for (const d of batch) if (!kept.has(d.id)) log.warn({ run: d.id }, 'run finished after its lease was lost; its outcome was not recorded');
      // Counted once recorded, and only runs that ended: a retry is counted by its step.
      for (const d of batch) {
        if (!kept.has(d.id) || d.outcome.outcome === null) continue;
        deps.metrics.runFinished(d.run.workflow_id, d.outcome.outcome, (finishedAt - new Date(d.run.inserted_at).getTime()) / 1000);
      }
      for (const d of batch) d.recorded();
      return [];
    } catch (err) {
      // The database is out of reach: try again shortly, holding the runs (the heartbeat
      // keeps their leases while it can). Past the lease they are another worker's to
      // reclaim, and this outcome is refused then anyway.
      log.warn({ runs: batch.length, err: { message: (err as Error).message } }, 'could not record run outcomes; retrying');
      // Leases are counted on the deps clock, and so is giving up on them.
      const now = deps.clock();
      const retry = batch.filter((d) => (d.giveUpAt ??= now + w.leaseMs) > now && !w.stopping);
      for (const d of batch) if (!retry.includes(d)) d.recorded();
      if (retry.length > 0) await new Promise((resolve) => setTimeout(resolve, 500));
      return retry;
    }
  });
  return (run, outcome) =>
    new Promise<void>((recorded) => {
      // The record is cut to its caps; the steps were handed every output whole.
      add({ id: run.id, attempt: run.attempt, run, outcome: capRecord(outcome, deps.config.runRecord), recorded });
    });
}

type RecordCheckpoint = (run: ClaimedRun, checkpoint: RunCheckpoint) => Promise<boolean>;

/**
 * The checkpoint recorder: like the outcome recorder, the checkpoints that come while one
 * statement records others wait and go together in the next, so a worker running many
 * runs at once makes one statement for them all, not one per run. The promise says whether
 * the attempt still holds its run; it rejects when the database did not answer (the step
 * then fails, transiently: its success could not be recorded).
 */
function checkpointRecorder(deps: Deps, w: WorkerState): RecordCheckpoint {
  const add = groupCommit<{ id: string; attempt: number; checkpoint: RunCheckpoint; done: (kept: boolean) => void; fail: (err: unknown) => void }>(
    async (batch) => {
      try {
        const kept = await checkpointRuns(deps.db, w.id, batch, new Date(deps.clock()));
        for (const d of batch) d.done(kept.has(d.id));
      } catch (err) {
        for (const d of batch) d.fail(err);
      }
      return [];
    },
  );
  return (run, checkpoint) => new Promise<boolean>((done, fail) => add({ id: run.id, attempt: run.attempt, checkpoint, done, fail }));
}

/**
 * Group commit, the outcome's and the checkpoint's: what comes while one batch is written
 * waits and goes with the next, so a worker running many runs at once makes one statement
 * for them, not one each. `write` hands back what must be written again first (its
 * database was out of reach).
 */
function groupCommit<T>(write: (batch: T[]) => Promise<T[]>): (item: T) => void {
  let pending: T[] = [];
  let writing = false;
  const drain = async () => {
    if (writing) return;
    writing = true;
    try {
      while (pending.length > 0) {
        const batch = pending;
        pending = [];
        pending.unshift(...(await write(batch)));
      }
    } finally {
      writing = false;
    }
  };
  return (item) => {
    pending.push(item);
    void drain();
  };
}

const FAILED_ATTEMPT_MESSAGE = {
  retrying: 'workflow run attempt failed; retrying',
  failed: 'workflow run failed',
  dead_letter: 'workflow run dead-lettered: a transient failure on its last attempt',
} as const;

/**
 * The one line of a failed attempt: which run and step, which attempt of how many, when the
 * next one is, the failure's code and the summary of its text, the run's trace (when it has
 * one), and for an error none of ours named its stack. Never the payload, a header value or a secret.
 */
function logFailedAttempt(deps: Deps, run: ClaimedRun, outcome: Outcome): void {
  const f = outcome.failure;
  if (f === undefined) return;
  const kind = outcome.status === 'retrying' ? 'retrying' : outcome.outcome === 'dead_letter' ? 'dead_letter' : 'failed';
  deps.log.warn(
    {
      run: run.id,
      workflow: run.workflow_id,
      step: f.step,
      attempt: run.attempt,
      max_attempts: run.max_attempts,
      ...(outcome.runAt ? { next_attempt_at: outcome.runAt.toISOString() } : {}),
      outcome: outcome.outcome,
      code: f.code,
      ...(f.status === undefined ? {} : { status: f.status }),
      error: failureSummary(f.message),
      ...(run.traceparent === null ? {} : { trace_id: traceIdOf(run.traceparent) }),
      ...(outcome.unexpected === undefined ? {} : { err: outcome.unexpected }),
    },
    FAILED_ATTEMPT_MESSAGE[kind],
  );
}

/**
 * The span of one attempt: a child of the span that made the run (its delivery, replay
 * request or schedule tick, whichever process that was), so every attempt of a run is in
 * one trace; the root of a trace of its own for a run made while tracing was off.
 */
function attemptSpan(tracing: Tracing, run: ClaimedRun): TraceSpan | undefined {
  return tracing.start('workflow.run', 'consumer', run.traceparent === null ? undefined : { traceparent: run.traceparent, tracestate: run.tracestate }, {
    'tributary.run.id': run.id,
    'tributary.workflow.id': run.workflow_id,
    'tributary.workflow.version': run.workflow_version,
    'tributary.trigger.key': run.trigger_key,
    'tributary.run.attempt': run.attempt,
    'tributary.run.max_attempts': run.max_attempts,
    'tributary.run.replay_of': run.replay_of,
  });
}

/** The attempt's end on its span: the run's status and outcome; an attempt that did not succeed is an error, with the failure's summary. */
function endAttemptSpan(span: TraceSpan, outcome: Outcome): void {
  span.set({
    'tributary.run.status': outcome.status,
    'tributary.run.outcome': outcome.outcome,
    'tributary.run.facts_written': outcome.factsWritten,
    'tributary.run.next_attempt_at': outcome.runAt?.toISOString(),
  });
  const f = outcome.failure;
  if (f !== undefined) span.fail(f.code, `step ${f.step}: ${failureSummary(f.message)}`);
  span.end();
}

/** One attempt of a run, executed and its outcome recorded; what it could not foresee is logged with the run's id. */
async function attempt(deps: Deps, recordCheckpoint: RecordCheckpoint, recordOutcome: RecordOutcome, facts: FactWriter, run: ClaimedRun): Promise<void> {
  // Built only when tracing is on: the attributes are not made for nothing.
  const span = deps.tracing.enabled ? attemptSpan(deps.tracing, run) : undefined;
  const parkedOn = run.checkpoint?.parked?.key;
  if (parkedOn !== undefined) deps.metrics.runResumed(run.definition.find((s) => s.key === parkedOn)?.type ?? 'unknown');
  let outcome: Outcome;
  try {
    const env = {
      db: deps.db,
      clock: deps.clock,
      connectors: deps.connectors,
      expressions: deps.expressions,
      metrics: deps.metrics,
      trace: span,
      storeFacts: facts.store,
      checkpoint: (checkpoint: RunCheckpoint) => recordCheckpoint(run, checkpoint),
      outputMaxBytes: deps.config.runRecord.outputBytes,
    };
    outcome = await executeRun(env, run, { schedule: deps.config.runRetrySchedule, retryAfterMaxMs: deps.config.runRetryAfterMaxMs });
  } catch (err) {
    deps.log.error({ run: run.id, workflow: run.workflow_id, err }, 'workflow run failed unexpectedly');
    span?.fail('unexpected', 'the run failed unexpectedly');
    span?.end();
    return;
  }
  if (outcome.leaseLost) {
    // Another worker holds the run now and resumes it from the checkpoint: this attempt records nothing.
    deps.log.warn({ run: run.id, workflow: run.workflow_id, attempt: run.attempt }, 'run lost its lease before a checkpoint; this attempt stopped');
    span?.end();
    return;
  }
  logFailedAttempt(deps, run, outcome);
  await recordOutcome(run, outcome);
  if (outcome.wait !== undefined) deps.metrics.runWaited(outcome.wait.kind);
  if (span !== undefined) endAttemptSpan(span, outcome);
}

/**
 * The claim loop: claims ready runs into the free slots and starts them. Called whenever a
 * run may be ready (a signal, a notification, the poll, a finished run); calls made while
 * it runs fold into one more pass.
 */
function claimLoop(deps: Deps, w: WorkerState, execute: (run: ClaimedRun) => Promise<void>): { loop: () => Promise<void>; settled: () => Promise<void> } {
  const { config, log } = deps;
  const capacity = config.workerConcurrency;
  const minBatch = Math.max(1, Math.floor(capacity / 4));
  let looping: Promise<void> | undefined;
  let again = false;
  let databaseDown = false;
  // Where the next claim's rotation over the workspaces starts (claimBatch).
  let after = FIRST_WORKSPACE;
  // And over the concurrency keys, with whether keyed runs were ready at the last look.
  let keyed = FIRST_KEYED;
  const loop = async () => {
    if (looping) {
      again = true;
      return;
    }
    let passed!: () => void;
    looping = new Promise((resolve) => (passed = resolve));
    try {
      do {
        again = false;
        if (w.stopping) break;
        const free = capacity - w.running.size;
        // Claims are one statement at a time: while most slots are busy, wait until a
        // quarter is free and take them together, rather than a claim per finished run.
        if (free <= 0 || (w.running.size > 0 && free < minBatch)) break;
        let claimed: ClaimedRun[];
        try {
          const t = new Date(deps.clock());
          const batch = await claimBatch(deps.db, w.id, free, t, new Date(t.getTime() + w.leaseMs), after, keyed);
          claimed = batch.runs;
          after = batch.after;
          keyed = batch.keyed;
          // A workspace that got its whole share may have more ready right now.
          if (batch.more && claimed.length < free) again = true;
          if (databaseDown) log.info('worker reaches the database again');
          databaseDown = false;
        } catch (err) {
          if (!databaseDown) log.warn({ err: { message: (err as Error).message } }, 'worker cannot claim runs; retrying');
          databaseDown = true;
          break;
        }
        // A claim that was under way when the worker began to stop: its runs go back at once,
        // not started, so none is left running past the drain with the lease still held.
        if (w.stopping) {
          await releaseClaimed(
            deps,
            w,
            claimed.map((r) => r.id),
          );
          break;
        }
        for (const run of claimed) {
          const p = execute(run).finally(() => {
            w.running.delete(run.id);
            void loop();
          });
          w.running.set(run.id, p);
        }
        // A full batch: there may be more ready right now.
        if (claimed.length === free) again = true;
      } while (again);
    } finally {
      looping = undefined;
      passed();
    }
  };
  // The pass under way, if any, has ended: every run it claimed is running or released.
  return { loop, settled: () => looping ?? Promise.resolve() };
}

/** Gives runs back to the queue, ready at once for another worker, the attempt not counted. */
async function releaseClaimed(deps: Deps, w: WorkerState, ids: string[]): Promise<void> {
  if (ids.length === 0) return;
  await releaseRuns(deps.db, w.id, ids, new Date(deps.clock())).catch((err) =>
    deps.log.warn({ err: { message: (err as Error).message } }, 'could not release runs; their leases will run out'),
  );
}

/** How often kept connectors unused since the last look are dropped. */
const FORGET_IDLE_CONNECTORS_MS = 60_000;

/** The heartbeat that extends the leases of this worker's runs, and the reclaim of runs whose lease ran out. */
function leaseKeeping(deps: Deps, w: WorkerState, onReclaimed: () => void): { stopReclaim(): void; stopHeartbeat(): void } {
  const beat = setInterval(
    () => {
      heartbeat(deps.db, w.id, [...w.running.keys()], new Date(deps.clock() + w.leaseMs)).catch(() => undefined);
    },
    Math.max(500, Math.floor(w.leaseMs / 3)),
  );
  beat.unref();

  // Any worker may reclaim expired leases; it is one indexed update.
  const reclaim = setInterval(
    () => {
      reclaimExpired(deps.db, new Date(deps.clock()), deps.config.runMaxLeaseLosses)
        .then((n) => {
          if (n > 0) {
            deps.log.warn({ runs: n }, 'reclaimed runs whose worker stopped');
            onReclaimed();
          }
        })
        .catch(() => undefined);
    },
    Math.max(200, Math.floor(w.leaseMs / 2)),
  );
  reclaim.unref();

  // Connectors kept by this process (and their opened secrets) live while steps use them.
  const forget = setInterval(() => deps.connectors.kept.forgetIdle(), FORGET_IDLE_CONNECTORS_MS);
  forget.unref();
  return {
    stopReclaim: () => {
      clearInterval(reclaim);
      clearInterval(forget);
    },
    stopHeartbeat: () => clearInterval(beat),
  };
}

export function startWorker(deps: Deps): Worker {
  const { config, log } = deps;
  const w: WorkerState = {
    id: `${os.hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`,
    leaseMs: config.workerLeaseSeconds * 1000,
    running: new Map(),
    stopping: false,
  };
  const recordOutcome = outcomeRecorder(deps, w);
  const recordCheckpoint = checkpointRecorder(deps, w);
  // The write_fact stores of the runs executing together go in one statement (fact-writer.ts).
  const facts = factWriter(deps.db);
  const { loop, settled } = claimLoop(deps, w, (run) => attempt(deps, recordCheckpoint, recordOutcome, facts, run));
  const leases = leaseKeeping(deps, w, () => void loop());

  let pollTimer: NodeJS.Timeout | undefined;
  const poll = () => {
    if (w.stopping) return;
    void loop();
    pollTimer = setTimeout(poll, config.workerPollMs);
    pollTimer.unref();
  };

  const unsubscribe = deps.queueSignal.subscribe(() => void loop());
  const listener = config.databaseUrl ? listen(config.databaseUrl, () => void loop(), deps) : undefined;
  poll();

  return {
    id: w.id,
    inFlight: () => w.running.size,
    async stop(graceMs = config.shutdownGraceMs) {
      w.stopping = true;
      clearTimeout(pollTimer);
      leases.stopReclaim();
      unsubscribe();
      await listener?.close();
      // A claim under way now would add runs after the wait below began: wait for it first.
      await settled();
      const all = Promise.allSettled([...w.running.values()]);
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([all, new Promise((resolve) => (timer = setTimeout(resolve, graceMs)))]);
      clearTimeout(timer);
      leases.stopHeartbeat();
      if (w.running.size > 0) {
        log.warn({ runs: w.running.size }, 'releasing runs still executing at shutdown');
        await releaseClaimed(deps, w, [...w.running.keys()]);
      }
    },
  };
}

/** LISTEN on a connection of its own, reconnecting while the worker runs. */
function listen(databaseUrl: string, onNotify: () => void, deps: Deps): { close(): Promise<void> } {
  let client: pg.Client | undefined;
  let closed = false;
  let timer: NodeJS.Timeout | undefined;
  const connect = async () => {
    if (closed) return;
    const c = new pg.Client({ connectionString: databaseUrl, connectionTimeoutMillis: deps.config.databaseConnectTimeoutMs });
    client = c;
    c.on('notification', onNotify);
    c.on('error', () => undefined);
    c.on('end', () => {
      if (!closed) timer = setTimeout(connect, 1000);
    });
    try {
      await c.connect();
      await c.query(`LISTEN ${NOTIFY_CHANNEL}`);
      // Runs queued while we were not listening.
      onNotify();
    } catch {
      await c.end().catch(() => undefined);
    }
  };
  void connect();
  return {
    async close() {
      closed = true;
      clearTimeout(timer);
      await client?.end().catch(() => undefined);
    },
  };
}
