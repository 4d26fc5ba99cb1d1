/**
 * Documents are read, validated and normalized in child processes (sandbox.ts), so an
 * upload cannot stall the event loop (30,000 operations once froze /healthz for 50 s) or
 * exhaust the server's heap. Each child takes one document at a time under a heap limit
 * and a time budget; past either, the child is ended and the next document gets a new one.
 *
 * At most `processes` documents are read at once per process; up to `queue` more wait
 * their turn, and past that an upload is 503 with Retry-After. Children start on first
 * use, are reused, and never keep the process alive while idle.
 */
import { AppError } from '../errors.ts';
import { startSandbox, type Sandbox } from '../sandbox.ts';
import type { ImportOptions } from './import.ts';
import type { ImportJob, ImportReply } from './import-child.ts';
import type { NormalizedSpec } from './normalize.ts';
import { DocumentProblem } from './parse.ts';

export interface ImportLimits {
  /** Documents read at once (API_SPEC_IMPORT_PROCESSES). */
  processes: number;
  /** Documents that may wait for a child (API_SPEC_IMPORT_QUEUE). */
  queue: number;
  /** Time one document may take (API_SPEC_IMPORT_TIMEOUT_MS). */
  timeoutMs: number;
  /** Heap of one child (API_SPEC_IMPORT_HEAP_MB). */
  heapMb: number;
}

export interface SpecImporter {
  /** The normalized document, or a DocumentProblem (also when a budget is exceeded). */
  importSpec(text: string, format: 'json' | 'yaml', options: Omit<ImportOptions, 'work'>): Promise<NormalizedSpec>;
  /** Children started, documents being read and waiting: for tests and logs. */
  stats(): { started: number; running: number; waiting: number };
  /** Ends every child; documents still waiting or running are refused. */
  close(): Promise<void>;
}

const CHILD_SCRIPT = new URL('./import-child.ts', import.meta.url);

const shuttingDown = () => new AppError('unavailable', 'The service is shutting down', { retryAfter: 1 });

const seconds = (ms: number) => (ms >= 1000 ? `${Math.round(ms / 100) / 10} s` : `${ms} ms`);

interface Child {
  box: Sandbox;
  ready: Promise<void>;
  /** What the document being read waits for. */
  settle?: (reply: ImportReply | { exited: true; outOfMemory: boolean; killedFor?: string }) => void;
}

export function specImporter(limits: ImportLimits): SpecImporter {
  const idle: Child[] = [];
  const running = new Set<Child>();
  const waiting: Array<() => void> = [];
  let started = 0;
  let busy = 0;
  let closed = false;

  const spawn = (): Child => {
    started++;
    let ready!: () => void;
    const c: Child = { box: undefined as unknown as Sandbox, ready: new Promise<void>((resolve) => (ready = resolve)) };
    c.box = startSandbox<ImportReply>(
      CHILD_SCRIPT,
      { memoryMb: limits.heapMb, allowCodeGeneration: true },
      {
        ready,
        message: (m) => c.settle?.(m),
        exit: (end) => {
          ready();
          c.settle?.({ exited: true, outOfMemory: end.outOfMemory, killedFor: end.killedFor });
        },
      },
    );
    return c;
  };

  // One document on one child; the child goes back to `idle` only if it answered.
  async function runOn(c: Child, job: ImportJob): Promise<NormalizedSpec> {
    const reply = await new Promise<Parameters<NonNullable<Child['settle']>>[0]>((resolve) => {
      c.settle = resolve;
      // The budget counts from the start of the read: a child's start is not the document's doing.
      void c.ready.then(() => {
        if (c.box.ending) return;
        const timer = setTimeout(() => c.box.kill('time'), limits.timeoutMs);
        c.settle = (r) => {
          clearTimeout(timer);
          resolve(r);
        };
        c.box.send(job);
      });
    });
    c.settle = undefined;
    if ('exited' in reply) {
      if (reply.killedFor === 'time')
        throw new DocumentProblem(`The document exceeded its time budget (${seconds(limits.timeoutMs)}) while it was read; make it smaller`);
      if (reply.outOfMemory) throw new DocumentProblem(`The document exceeded its memory budget (${limits.heapMb} MB) while it was read; make it smaller`);
      throw closed ? shuttingDown() : new Error('the import process stopped unexpectedly');
    }
    c.box.idle();
    if (!closed) idle.push(c);
    if (reply.ok) return reply.spec;
    if ('problem' in reply) throw new DocumentProblem(reply.problem);
    throw new Error(`importing the document failed: ${reply.error}`);
  }

  // A finished document hands its slot to the first one waiting, so `busy` never passes `processes`.
  async function acquire(): Promise<void> {
    if (busy < limits.processes) {
      busy++;
      return;
    }
    if (waiting.length >= limits.queue) {
      throw new AppError('unavailable', `${limits.processes + limits.queue} documents are being read or waiting; try again shortly`, {
        retryAfter: Math.max(1, Math.ceil(limits.timeoutMs / 1000)),
      });
    }
    await new Promise<void>((resolve) => waiting.push(resolve));
  }
  const release = () => {
    const next = waiting.shift();
    if (next) next();
    else busy--;
  };

  async function importSpec(text: string, format: 'json' | 'yaml', options: Omit<ImportOptions, 'work'>): Promise<NormalizedSpec> {
    if (closed) throw shuttingDown();
    await acquire();
    if (closed) throw shuttingDown();
    const child = idle.pop() ?? spawn();
    running.add(child);
    try {
      return await runOn(child, { text, format, options });
    } finally {
      running.delete(child);
      release();
    }
  }

  return {
    importSpec,
    stats: () => ({ started, running: busy, waiting: waiting.length }),
    async close() {
      closed = true;
      for (const wake of waiting.splice(0)) wake();
      const all = [...idle.splice(0), ...running];
      await Promise.all(
        all.map(
          (c) =>
            new Promise<void>((resolve) => {
              const settle = c.settle;
              c.settle = (r) => {
                settle?.(r);
                if ('exited' in r) resolve();
              };
              if (c.box.ending && c.settle === undefined) resolve();
              c.box.kill('closed');
            }),
        ),
      );
    },
  };
}
