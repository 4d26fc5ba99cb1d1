/**
 * Child processes for work that must not stall the event loop or exhaust the heap of the
 * process that asks for it: workflow expressions (expressions/expression-pool.ts) and
 * uploaded API documents (openapi/import-pool.ts).
 *
 * Processes, not worker threads: a worker thread that reaches its heap limit through one
 * large allocation (a 10-million-item array, a long string) aborts the whole process, since
 * V8 grants a dying isolate only a few MB of headroom. A child with its own
 * --max-old-space-size dies alone, and the pool that started it answers for the work.
 *
 * A child gets none of this process's environment (secrets among it), no stdin or stdout,
 * and no code generation from strings unless its script needs it (a JSON Schema validator
 * compiles its schemas). It says `{ready: true}` once its script is loaded
 * (serveSandbox); an idle child does not keep this process alive, a busy one does.
 * A child outlives a signal sent to this process's group or service (it ignores SIGTERM,
 * SIGINT and SIGHUP, in a process group of its own) and ends when this process closes it
 * or is gone.
 */
import { fork } from 'node:child_process';
import os from 'node:os';
import { fileURLToPath } from 'node:url';

export interface SandboxEnd {
  /** It ran out of heap. */
  outOfMemory: boolean;
  /** The reason given to kill(), when the pool ended it. */
  killedFor: string | undefined;
  /** The end of what it wrote on stderr, for a log. */
  stderr: string;
  /** The signal that ended it (null: it exited). */
  signal: NodeJS.Signals | null;
}

export interface SandboxEvents<M> {
  ready(): void;
  message(m: M): void;
  exit(end: SandboxEnd): void;
}

export interface Sandbox {
  /** Sends work; this process stays alive until idle(). */
  send(message: unknown): void;
  idle(): void;
  /** Ends the child at once; its exit event carries the reason. */
  kill(reason: string): void;
  readonly killedFor: string | undefined;
  /** Ended, or being ended. */
  readonly ending: boolean;
}

/** What a child wrote on stderr last, to tell an out-of-memory death from others. */
const STDERR_KEPT = 4096;

export interface SandboxOptions {
  memoryMb: number;
  args?: string[];
  allowCodeGeneration?: boolean;
  /** The child's OS scheduling priority (a nice value, 0-19): higher yields the CPU to this process and its other children. */
  priority?: number;
}

export function startSandbox<M>(script: URL, opts: SandboxOptions, events: SandboxEvents<M>): Sandbox {
  const proc = fork(fileURLToPath(script), opts.args ?? [], {
    execArgv: [`--max-old-space-size=${opts.memoryMb}`, ...(opts.allowCodeGeneration ? [] : ['--disallow-code-generation-from-strings'])],
    env: {},
    serialization: 'advanced',
    stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
    // A process group of its own: a signal to this process's group (a terminal's Ctrl-C, a
    // `kill -- -pid`) does not end the work this process still waits for. It still ends
    // with this process: its IPC channel closes then (serveSandbox).
    detached: true,
  });
  if (opts.priority !== undefined && opts.priority > 0 && proc.pid !== undefined) {
    try {
      os.setPriority(proc.pid, opts.priority);
    } catch {
      // A platform that refuses it runs the child at this process's priority: slower to yield, no less correct.
    }
  }
  let stderr = '';
  let killedFor: string | undefined;
  let exited = false;
  proc.stderr!.setEncoding('utf8');
  proc.stderr!.on('data', (chunk: string) => (stderr = (stderr + chunk).slice(-STDERR_KEPT)));
  const channel = () => proc.channel as { ref?: () => void; unref?: () => void } | undefined;
  const idle = () => {
    proc.unref();
    channel()?.unref?.();
    (proc.stderr as { unref?: () => void } | null)?.unref?.();
  };
  proc.on('message', (m: M | { ready: true }) => {
    if (m !== null && typeof m === 'object' && 'ready' in m) {
      idle();
      events.ready();
    } else events.message(m as M);
  });
  proc.on('error', () => undefined);
  proc.on('exit', (_code, signal) => {
    exited = true;
    events.exit({ outOfMemory: /heap out of memory|Allocation failed/i.test(stderr), killedFor, stderr, signal });
  });
  return {
    send(message) {
      proc.ref();
      channel()?.ref?.();
      proc.send(message as never);
    },
    idle,
    kill(reason) {
      if (exited || killedFor !== undefined) return;
      killedFor = reason;
      // Held open until its exit event has been handled.
      proc.ref();
      proc.kill('SIGKILL');
    },
    get killedFor() {
      return killedFor;
    },
    get ending() {
      return exited || killedFor !== undefined;
    },
  };
}

/** The child's side: answers messages with `handle`, says it is ready, and ends with its pool. */
export function serveSandbox<J>(handle: (job: J, reply: (m: unknown) => void) => void): void {
  const reply = (m: unknown) => process.send!(m as never);
  process.on('message', (job: J) => handle(job, reply));
  process.on('disconnect', () => process.exit(0));
  // A service manager signals every process of the service (systemd's KillMode=control-group):
  // the parent decides when its children end, while it drains.
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.on(signal, () => undefined);
  reply({ ready: true });
}
