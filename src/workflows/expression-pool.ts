/**
 * The expression pool: child processes that evaluate workflow expressions, so that no
 * expression can stall the event loop or exhaust the heap of the process that runs it.
 *
 * Processes, not worker threads: a worker thread that reaches its heap limit with one
 * large allocation (a 10-million-item array, a long string) aborts the whole process, not
 * just the thread, since V8 grants a dying isolate only a few MB of headroom. A child
 * process with its own --max-old-space-size dies alone.
 *
 * - A child that runs out of heap dies, and its job fails with the memory budget's message.
 * - A watchdog ends a child whose current evaluation has run past the time budget (plus a
 *   grace for JSONata's own guardrail, which ends most of them first with the same
 *   message). What no guardrail can interrupt (a backtracking regular expression, one huge
 *   builtin call) ends this way.
 * - Steps queue for a free child, which takes what waits in one message (up to MAX_BATCH
 *   steps: a message each way per batch, not per step, is most of what the pool costs).
 *   When a child dies under a batch of several, the pool cannot tell which step killed it:
 *   each goes again alone, so only the guilty one fails and no innocent one is charged.
 * - Ended children are replaced on demand. Idle children do not keep this process alive.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { budgetMessage, ExpressionError } from './expressions.ts';

export interface ExpressionPoolOptions {
  /** Child processes at most (EXPRESSION_PROCESSES). */
  processes: number;
  /** Heap of one child, in MB (EXPRESSION_MEMORY_MB). */
  memoryMb: number;
  /** One evaluation's time budget (EXPRESSION_TIMEOUT_MS). */
  timeoutMs: number;
}

/** Every expression of one step, over one input; with forEach, over each item of its result. */
export interface ExpressionJob {
  input: unknown;
  expressions: readonly string[];
  forEach?: string;
  /** Items forEach may give (it fails beyond). */
  maxItems?: number;
}

export interface ExpressionPool {
  /**
   * The results of the job's expressions, in order (undefined where one selects nothing):
   * one row, or one row per item with forEach. Throws ExpressionError, which is permanent.
   */
  run(job: ExpressionJob): Promise<unknown[][]>;
  /** Children alive now. */
  processes(): number;
  close(): Promise<void>;
}

// What crosses to the child and back (expression-child.ts).
export interface ChildJob {
  id: number;
  input: unknown;
  expressions: readonly string[];
  forEach?: string;
  maxItems: number;
}
export type JobReply = { id: number; ok: true; results: unknown[][] } | { id: number; ok: false; message: string };
export type ChildReply = { ready: true } | { progress: true } | { replies: JobReply[] };

/** Beyond the guardrail's own budget, before the watchdog ends a child. */
const GRACE_MS = 250;
const WATCH_EVERY_MS = 50;
/** Steps a child takes in one message. */
const MAX_BATCH = 16;
/** What a child wrote on stderr last, to tell an out-of-memory death from others. */
const STDERR_KEPT = 4096;

interface Pending extends ChildJob {
  resolve: (rows: unknown[][]) => void;
  reject: (err: Error) => void;
  /** It was in a batch whose child died: it goes alone now. */
  alone?: boolean;
}

interface Child {
  proc: ChildProcess;
  ready: boolean;
  /** The batch it holds (empty when idle). */
  jobs: Pending[];
  progressAt: number;
  /** Why the pool ended this child, for the job it held. */
  ending?: string;
  stderr: string;
}

const CHILD_PATH = fileURLToPath(new URL('./expression-child.ts', import.meta.url));

export function createExpressionPool(opts: ExpressionPoolOptions): ExpressionPool {
  const children = new Set<Child>();
  const queue: Pending[] = [];
  let nextId = 1;
  let closed = false;
  let watch: NodeJS.Timeout | undefined;

  const spawn = () => {
    const proc = fork(CHILD_PATH, [String(opts.timeoutMs), String(opts.memoryMb)], {
      execArgv: [`--max-old-space-size=${opts.memoryMb}`, '--disallow-code-generation-from-strings'],
      // Nothing of this process's environment (secrets among it) is the child's business.
      env: {},
      serialization: 'advanced',
      stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
    });
    // Started because a job waits: it holds this process open until it is idle.
    const c: Child = { proc, ready: false, jobs: [], progressAt: 0, stderr: '' };
    proc.stderr!.setEncoding('utf8');
    proc.stderr!.on('data', (chunk: string) => (c.stderr = (c.stderr + chunk).slice(-STDERR_KEPT)));
    proc.on('message', (m: ChildReply) => {
      if ('ready' in m) {
        c.ready = true;
        idle(c);
        dispatch();
        return;
      }
      if ('progress' in m) {
        c.progressAt = Date.now();
        return;
      }
      const jobs = new Map(c.jobs.map((j) => [j.id, j]));
      c.jobs = [];
      idle(c);
      for (const r of m.replies) {
        const job = jobs.get(r.id);
        if (job === undefined) continue;
        if (r.ok) job.resolve(r.results);
        else job.reject(new ExpressionError(r.message));
      }
      dispatch();
    });
    proc.on('error', () => undefined);
    proc.on('exit', () => {
      children.delete(c);
      const jobs = c.jobs;
      c.jobs = [];
      if (closed) {
        // Closing is not the expression's fault: not an ExpressionError, which would fail its run for good.
        for (const job of jobs) job.reject(new Error('The expression pool is closed'));
      } else if (jobs.length > 1) {
        for (const job of jobs) job.alone = true;
        queue.unshift(...jobs);
      } else if (jobs.length === 1) {
        jobs[0]!.reject(new ExpressionError(c.ending ?? (/heap out of memory|Allocation failed/i.test(c.stderr) ? budgetMessage.memory(opts.memoryMb) : 'The expression stopped its process unexpectedly')));
      } else if (!c.ready && !closed) {
        // It died before it could take work: whatever waits would wait for ever.
        for (const waiting of queue.splice(0)) waiting.reject(new Error(`The expression pool could not start a process: ${c.stderr.trim().slice(-300) || 'it exited'}`));
      }
      dispatch();
    });
    children.add(c);
  };

  // An idle child does not hold this process open; a busy one does, until it answers.
  const idle = (c: Child) => {
    c.proc.unref();
    (c.proc.channel as { unref?: () => void } | undefined)?.unref?.();
    (c.proc.stderr as { unref?: () => void } | null)?.unref?.();
  };
  const busy = (c: Child) => {
    c.proc.ref();
    (c.proc.channel as { ref?: () => void } | undefined)?.ref?.();
  };

  const dispatch = () => {
    if (closed) return;
    for (const c of children) {
      if (queue.length === 0) break;
      if (!c.ready || c.jobs.length > 0 || c.ending !== undefined) continue;
      const batch = queue[0]!.alone ? queue.splice(0, 1) : takeBatch();
      try {
        c.proc.send({ jobs: batch.map(({ resolve: _r, reject: _j, alone: _a, ...job }) => job) });
      } catch (err) {
        for (const job of batch) job.reject(new ExpressionError(`The expression's input cannot be passed on: ${(err as Error).message}`));
        continue;
      }
      c.jobs = batch;
      busy(c);
      c.progressAt = Date.now();
    }
    let starting = 0;
    for (const c of children) if (!c.ready) starting++;
    for (let n = queue.length - starting; n > 0 && children.size < opts.processes; n--) spawn();
    const working = [...children].some((c) => c.jobs.length > 0);
    if (working && watch === undefined) {
      watch = setInterval(watchdog, WATCH_EVERY_MS);
      watch.unref();
    } else if (!working && watch !== undefined) {
      clearInterval(watch);
      watch = undefined;
    }
  };

  // The steps at the front of the queue, up to MAX_BATCH, stopping at one that must go alone.
  const takeBatch = () => {
    let n = 0;
    while (n < queue.length && n < MAX_BATCH && !queue[n]!.alone) n++;
    return queue.splice(0, n);
  };

  const watchdog = () => {
    const now = Date.now();
    for (const c of children) {
      if (c.jobs.length === 0 || c.ending !== undefined) continue;
      if (now - c.progressAt > opts.timeoutMs + GRACE_MS) {
        c.ending = budgetMessage.time(opts.timeoutMs);
        c.proc.kill('SIGKILL');
      }
    }
  };

  return {
    run(job) {
      if (closed) return Promise.reject(new Error('The expression pool is closed'));
      return new Promise<unknown[][]>((resolve, reject) => {
        queue.push({ id: nextId++, input: job.input, expressions: job.expressions, forEach: job.forEach, maxItems: job.maxItems ?? Number.MAX_SAFE_INTEGER, resolve, reject });
        dispatch();
      });
    },
    processes: () => children.size,
    async close() {
      closed = true;
      clearInterval(watch);
      for (const waiting of queue.splice(0)) waiting.reject(new Error('The expression pool is closed'));
      await Promise.all(
        [...children].map(
          (c) =>
            new Promise<void>((resolve) => {
              if (c.proc.exitCode !== null || c.proc.signalCode !== null) return resolve();
              c.proc.once('exit', () => resolve());
              c.proc.ref();
              c.proc.kill('SIGKILL');
            }),
        ),
      );
    },
  };
}
