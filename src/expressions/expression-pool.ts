/**
 * The expression pool: child processes (sandbox.ts) that evaluate workflow expressions, so
 * that no expression can stall the event loop or exhaust the heap of the process that runs it.
 *
 * - A child that runs out of heap dies, and its job fails with the memory budget's message.
 * - A watchdog ends a child whose current evaluation has run past the time budget (plus a
 *   grace for JSONata's own guardrail, which ends most of them first with the same
 *   message). What no guardrail can interrupt (a backtracking regular expression, one huge
 *   builtin call) ends this way. The time counted is the evaluation's own, from the moment
 *   the child says it started it: not the time a job waited in the queue, crossed to the
 *   child, or waited behind the jobs before it.
 * - Fair between workspaces: every job carries its workspace, and waiting jobs are served
 *   round-robin by workspace. A free child takes what waits in one message (up to
 *   MAX_BATCH steps: a message each way per batch, not per step, is most of what the pool
 *   costs), one job of each waiting workspace in turn. When a workspace that no child
 *   serves has work waiting and no child is free, one busy child is asked to give back
 *   the jobs of its batch it has not started: after its current evaluation it answers
 *   what it has done and returns the rest, which wait again (their workspace's turn
 *   passed). So one workspace's queue delays another's job by at most one evaluation per
 *   child, and a workspace alone keeps the throughput of full batches.
 * - When a child dies under several jobs, the pool cannot tell which one killed it: each
 *   goes again alone, so only the guilty one fails and no innocent one is charged.
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
  /** The children's OS scheduling priority (nice value, 0-19; higher yields the CPU to others). 0 when absent. */
  priority?: number;
}

/** Every expression of one step, over one input; with forEach, over each item of its result. */
export interface ExpressionJob {
  /** Whose job it is: waiting jobs are served round-robin by workspace. */
  workspace: string;
  input: unknown;
  expressions: readonly string[];
  forEach?: string | undefined;
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
  forEach?: string | undefined;
  maxItems: number;
}
/** Work, or `giveBack`: answer after the current job, and return the jobs not started. */
export type ChildMessage = { jobs: ChildJob[] } | { giveBack: true };
export type JobReply = { id: number; ok: true; results: unknown[][] } | { id: number; ok: false; message: string };
/**
 * `at`: when the child started an evaluation, on its clock (the same wall clock as this
 * process's). `returned`: jobs given back unstarted (ChildMessage giveBack), in their order.
 */
export type ChildReply = { progress: true; at: number } | { replies: JobReply[]; returned?: number[] };

/** Beyond the guardrail's own budget, before the watchdog ends a child. */
const GRACE_MS = 250;
const WATCH_EVERY_MS = 50;
/** A watchdog tick this late means this process's loop was busy: progress may wait unread, so it does not judge. */
const LATE_TICK_MS = 3 * WATCH_EVERY_MS;
/**
 * How long a child may hold work without starting an evaluation (reading its message):
 * no expression runs then, so it is not the budget's time; only a stuck child takes this long.
 */
const DELIVERY_MS = 30_000;
/** Steps a child takes in one message. */
const MAX_BATCH = 16;

interface Pending extends ChildJob {
  workspace: string;
  resolve: (rows: unknown[][]) => void;
  reject: (err: Error) => void;
  /** It was with others on a child that died: it goes alone now. */
  alone?: boolean;
}

interface Child {
  box: Sandbox;
  ready: boolean;
  /** The jobs it holds and has not answered (empty when idle). */
  jobs: Map<number, Pending>;
  /** Asked to give back what it has not started, and not answered yet. */
  givingBack: boolean;
  /** When it was last given work. */
  sentAt: number;
  /** When its current evaluation started, as it said; undefined until it says so. */
  evalAt: number | undefined;
}

const CHILD_SCRIPT = new URL('./expression-child.ts', import.meta.url);

export function createExpressionPool(opts: ExpressionPoolOptions): ExpressionPool {
  const children = new Set<Child>();
  // Waiting jobs by workspace; the map's order is the rotation (a served workspace goes to its end).
  const waiting = new Map<string, Pending[]>();
  let waitingCount = 0;
  let nextId = 1;
  let closed = false;
  const closing: Array<() => void> = [];
  let watch: NodeJS.Timeout | undefined;
  let lastTick = 0;

  const enqueue = (job: Pending, front = false) => {
    const q = waiting.get(job.workspace);
    if (q === undefined) waiting.set(job.workspace, [job]);
    else if (front) q.unshift(job);
    else q.push(job);
    waitingCount++;
  };

  // The next job of the workspace whose turn it is; that workspace goes to the end of the rotation.
  const take = (accept: (job: Pending, workspace: string) => boolean): Pending | undefined => {
    for (const [workspace, q] of waiting) {
      if (!accept(q[0]!, workspace)) continue;
      const job = q.shift()!;
      waiting.delete(workspace);
      if (q.length > 0) waiting.set(workspace, q);
      waitingCount--;
      return job;
    }
    return undefined;
  };

  const rejectAll = (err: () => Error) => {
    for (const q of waiting.values()) for (const job of q) job.reject(err());
    waiting.clear();
    waitingCount = 0;
  };

  const spawn = () => {
    // box is set by the next statement: the sandbox's callbacks close over c, and run only after it is.
    const c: Child = { box: undefined as unknown as Sandbox, ready: false, jobs: new Map(), givingBack: false, sentAt: 0, evalAt: undefined };
    c.box = startSandbox<ChildReply>(
      CHILD_SCRIPT,
      { memoryMb: opts.memoryMb, args: [String(opts.timeoutMs), String(opts.memoryMb)], priority: opts.priority ?? 0 },
      {
        ready() {
          c.ready = true;
          dispatch();
        },
        message(m) {
          if ('progress' in m) {
            if (c.jobs.size > 0) c.evalAt = Math.max(c.evalAt ?? 0, m.at);
            return;
          }
          for (const r of m.replies) {
            const job = c.jobs.get(r.id);
            if (job === undefined) continue;
            c.jobs.delete(r.id);
            if (r.ok) job.resolve(r.results);
            else job.reject(new ExpressionError(r.message));
          }
          if (m.returned !== undefined) {
            c.givingBack = false;
            requeue(m.returned.flatMap((id) => c.jobs.get(id) ?? []));
            for (const id of m.returned) c.jobs.delete(id);
          }
          if (c.jobs.size === 0) {
            c.evalAt = undefined;
            c.box.idle();
          }
          dispatch();
        },
        exit(end) {
          children.delete(c);
          const jobs = [...c.jobs.values()];
          c.jobs.clear();
          if (closed) {
            // Closing is not the expression's fault: not an ExpressionError, which would fail its run for good.
            for (const job of jobs) job.reject(new ExpressionPoolError('The expression pool is closed'));
            if (children.size === 0) for (const done of closing.splice(0)) done();
            return;
          }
          if (jobs.length > 1) {
            for (const job of jobs.reverse()) {
              job.alone = true;
              enqueue(job, true);
            }
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
            rejectAll(() => new Error(`The expression pool could not start a process: ${end.stderr.trim().slice(-300) || 'it exited'}`));
          }
          dispatch();
        },
      },
    );
    children.add(c);
  };

  // Jobs given back unstarted wait again at the front of their workspace's queue, whose turn has passed: it goes to the end of the rotation.
  const requeue = (jobs: Pending[]) => {
    for (const job of [...jobs].reverse()) enqueue(job, true);
    for (const workspace of new Set(jobs.map((j) => j.workspace))) {
      const q = waiting.get(workspace)!;
      waiting.delete(workspace);
      waiting.set(workspace, q);
    }
  };

  const send = (c: Child, batch: Pending[]): void => {
    const message: ChildMessage = { jobs: batch.map(({ resolve: _r, reject: _j, alone: _a, workspace: _w, ...job }) => job) };
    try {
      c.box.send(message);
    } catch (err) {
      c.box.idle();
      for (const job of batch) job.reject(new ExpressionError(`The expression's input cannot be passed on: ${(err as Error).message}`));
      return;
    }
    c.sentAt = Date.now();
    c.evalAt = undefined;
    for (const job of batch) c.jobs.set(job.id, job);
  };

  // One job of each waiting workspace in turn, up to MAX_BATCH; a job that must go alone goes in a batch of its own.
  const takeBatch = (): Pending[] => {
    const first = take(() => true)!;
    if (first.alone) return [first];
    const batch = [first];
    while (batch.length < MAX_BATCH && waitingCount > 0) {
      const job = take((j) => !j.alone);
      if (job === undefined) break;
      batch.push(job);
    }
    return batch;
  };

  const dispatch = () => {
    if (closed) return;
    for (const c of children) {
      if (waitingCount === 0) break;
      if (!c.ready || c.jobs.size > 0 || c.box.ending) continue;
      send(c, takeBatch());
    }
    // No free child and a workspace waits that no child serves: the busy child with the most jobs gives back what it has not started.
    if (waitingCount > 0 && children.size >= opts.processes && ![...children].some((c) => c.givingBack || c.jobs.size === 0)) {
      const served = new Set<string>();
      for (const c of children) for (const job of c.jobs.values()) served.add(job.workspace);
      if ([...waiting.keys()].some((w) => !served.has(w))) {
        let most: Child | undefined;
        for (const c of children) if (!c.box.ending && c.jobs.size > 1 && (most === undefined || c.jobs.size > most.jobs.size)) most = c;
        if (most !== undefined) {
          most.givingBack = true;
          most.box.send({ giveBack: true } satisfies ChildMessage);
        }
      }
    }
    let starting = 0;
    for (const c of children) if (!c.ready) starting++;
    for (let n = waitingCount - starting; n > 0 && children.size < opts.processes; n--) spawn();
    const working = [...children].some((c) => c.jobs.size > 0);
    if (working && watch === undefined) {
      lastTick = Date.now();
      watch = setInterval(watchdog, WATCH_EVERY_MS);
      watch.unref();
    } else if (!working && watch !== undefined) {
      clearInterval(watch);
      watch = undefined;
    }
  };

  const watchdog = () => {
    const now = Date.now();
    const late = now - lastTick > LATE_TICK_MS;
    lastTick = now;
    // This loop was held up: a child's word that it moved on may wait unread; the next tick, after a poll, judges.
    if (late) return;
    for (const c of children) {
      if (c.jobs.size === 0 || c.box.ending) continue;
      if (c.evalAt !== undefined ? now - c.evalAt > opts.timeoutMs + GRACE_MS : now - c.sentAt > DELIVERY_MS + opts.timeoutMs)
        c.box.kill(budgetMessage.time(opts.timeoutMs));
    }
  };

  return {
    run(job) {
      if (closed) return Promise.reject(new ExpressionPoolError('The expression pool is closed'));
      return new Promise<unknown[][]>((resolve, reject) => {
        enqueue({
          id: nextId++,
          workspace: job.workspace,
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
      rejectAll(() => new ExpressionPoolError('The expression pool is closed'));
      if (children.size === 0) return;
      const done = new Promise<void>((resolve) => closing.push(resolve));
      for (const c of children) c.box.kill('The expression pool is closed');
      await done;
    },
  };
}
