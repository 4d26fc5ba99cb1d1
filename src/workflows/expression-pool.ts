/**
 * The expression pool: child processes (sandbox.ts) that evaluate workflow expressions, so
 * that no expression can stall the event loop or exhaust the heap of the process that runs it.
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
import { startSandbox, type Sandbox } from '../sandbox.ts';
import { budgetMessage, ExpressionError, ExpressionPoolError } from './expressions.ts';

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
   * one row, or one row per item with forEach. Throws ExpressionError, which is permanent,
   * or ExpressionPoolError (closed, a process lost to an outside signal), which is not.
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
export type ChildReply = { progress: true } | { replies: JobReply[] };

/** Beyond the guardrail's own budget, before the watchdog ends a child. */
const GRACE_MS = 250;
const WATCH_EVERY_MS = 50;
/** Steps a child takes in one message. */
const MAX_BATCH = 16;

interface Pending extends ChildJob {
  resolve: (rows: unknown[][]) => void;
  reject: (err: Error) => void;
  /** It was in a batch whose child died: it goes alone now. */
  alone?: boolean;
}

interface Child {
  box: Sandbox;
  ready: boolean;
  /** The batch it holds (empty when idle). */
  jobs: Pending[];
  progressAt: number;
}

const CHILD_SCRIPT = new URL('./expression-child.ts', import.meta.url);

export function createExpressionPool(opts: ExpressionPoolOptions): ExpressionPool {
  const children = new Set<Child>();
  const queue: Pending[] = [];
  let nextId = 1;
  let closed = false;
  const closing: Array<() => void> = [];
  let watch: NodeJS.Timeout | undefined;

  const spawn = () => {
    // box is set by the next statement: the sandbox's callbacks close over c, and run only after it is.
    const c: Child = { box: undefined as unknown as Sandbox, ready: false, jobs: [], progressAt: 0 };
    c.box = startSandbox<ChildReply>(
      CHILD_SCRIPT,
      { memoryMb: opts.memoryMb, args: [String(opts.timeoutMs), String(opts.memoryMb)] },
      {
        ready() {
          c.ready = true;
          dispatch();
        },
        message(m) {
          if ('progress' in m) {
            c.progressAt = Date.now();
            return;
          }
          const jobs = new Map(c.jobs.map((j) => [j.id, j]));
          c.jobs = [];
          c.box.idle();
          for (const r of m.replies) {
            const job = jobs.get(r.id);
            if (job === undefined) continue;
            if (r.ok) job.resolve(r.results);
            else job.reject(new ExpressionError(r.message));
          }
          dispatch();
        },
        exit(end) {
          children.delete(c);
          const jobs = c.jobs;
          c.jobs = [];
          if (closed) {
            // Closing is not the expression's fault: not an ExpressionError, which would fail its run for good.
            for (const job of jobs) job.reject(new ExpressionPoolError('The expression pool is closed'));
            if (children.size === 0) for (const done of closing.splice(0)) done();
            return;
          }
          if (jobs.length > 1) {
            for (const job of jobs) job.alone = true;
            queue.unshift(...jobs);
          } else if (jobs.length === 1 && end.killedFor === undefined && !end.outOfMemory && end.signal !== null) {
            // A signal the pool did not send (an operator's, a service manager's): not the
            // expression's doing, so not an ExpressionError; the step goes again (transient).
            jobs[0]!.reject(new ExpressionPoolError(`The expression's process was ended by ${end.signal} from outside the pool`));
          } else if (jobs.length === 1) {
            jobs[0]!.reject(
              new ExpressionError(end.killedFor ?? (end.outOfMemory ? budgetMessage.memory(opts.memoryMb) : 'The expression stopped its process unexpectedly')),
            );
          } else if (!c.ready) {
            // It died before it could take work: whatever waits would wait for ever.
            for (const waiting of queue.splice(0))
              waiting.reject(new Error(`The expression pool could not start a process: ${end.stderr.trim().slice(-300) || 'it exited'}`));
          }
          dispatch();
        },
      },
    );
    children.add(c);
  };

  // The steps at the front of the queue, up to MAX_BATCH, stopping at one that must go alone.
  const takeBatch = () => {
    if (queue[0]!.alone) return queue.splice(0, 1);
    let n = 0;
    while (n < queue.length && n < MAX_BATCH && !queue[n]!.alone) n++;
    return queue.splice(0, n);
  };

  const dispatch = () => {
    if (closed) return;
    for (const c of children) {
      if (queue.length === 0) break;
      if (!c.ready || c.jobs.length > 0 || c.box.ending) continue;
      const batch = takeBatch();
      try {
        c.box.send({ jobs: batch.map(({ resolve: _r, reject: _j, alone: _a, ...job }) => job) });
      } catch (err) {
        c.box.idle();
        for (const job of batch) job.reject(new ExpressionError(`The expression's input cannot be passed on: ${(err as Error).message}`));
        continue;
      }
      c.jobs = batch;
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

  const watchdog = () => {
    const now = Date.now();
    for (const c of children) {
      if (c.jobs.length > 0 && !c.box.ending && now - c.progressAt > opts.timeoutMs + GRACE_MS) c.box.kill(budgetMessage.time(opts.timeoutMs));
    }
  };

  return {
    run(job) {
      if (closed) return Promise.reject(new ExpressionPoolError('The expression pool is closed'));
      return new Promise<unknown[][]>((resolve, reject) => {
        queue.push({
          id: nextId++,
          input: job.input,
          expressions: job.expressions,
          forEach: job.forEach,
          maxItems: job.maxItems ?? Number.MAX_SAFE_INTEGER,
          resolve,
          reject,
        });
        dispatch();
      });
    },
    processes: () => children.size,
    async close() {
      closed = true;
      clearInterval(watch);
      for (const waiting of queue.splice(0)) waiting.reject(new ExpressionPoolError('The expression pool is closed'));
      if (children.size === 0) return;
      const done = new Promise<void>((resolve) => closing.push(resolve));
      for (const c of children) c.box.kill('The expression pool is closed');
      await done;
    },
  };
}
