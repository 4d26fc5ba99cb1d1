/**
 * Documents are read, validated and normalized in worker threads, so an upload cannot
 * stall the event loop (issue 19: 30,000 operations froze /healthz for 50 s) or exhaust
 * the server's heap. Each thread takes one document at a time under a heap limit and a
 * time budget; past either, the thread is ended and the next document gets a new one.
 *
 * At most `threads` documents are read at once per process; up to `queue` more wait their
 * turn, and past that an upload is 503 with Retry-After. Threads start on first use, are
 * reused, and never keep the process alive while idle (unref).
 */
import { Worker } from 'node:worker_threads';
import { AppError } from '../errors.ts';
import type { ImportOptions } from './import.ts';
import type { ImportJob } from './import-thread.ts';
import type { NormalizedSpec } from './normalize.ts';
import { DocumentProblem } from './parse.ts';

export interface ImportLimits {
  /** Documents read at once (API_SPEC_IMPORT_THREADS). */
  threads: number;
  /** Documents that may wait for a thread (API_SPEC_IMPORT_QUEUE). */
  queue: number;
  /** Time one document may take (API_SPEC_IMPORT_TIMEOUT_MS). */
  timeoutMs: number;
  /** Heap of one thread (API_SPEC_IMPORT_HEAP_MB). */
  heapMb: number;
}

export interface SpecImporter {
  /** The normalized document, or a DocumentProblem (also when a budget is exceeded). */
  importSpec(text: string, format: 'json' | 'yaml', options: Omit<ImportOptions, 'work'>): Promise<NormalizedSpec>;
  /** Threads started, documents being read and waiting: for tests and logs. */
  stats(): { started: number; running: number; waiting: number };
  /** Ends every thread; documents still waiting or running are refused. */
  close(): Promise<void>;
}

type Reply = { ok: true; spec: NormalizedSpec } | { ok: false; problem: string } | { ok: false; error: string };

const THREAD_URL = new URL('./import-thread.ts', import.meta.url);

const shuttingDown = () => new AppError('unavailable', 'The service is shutting down', { retryAfter: 1 });

const seconds = (ms: number) => (ms >= 1000 ? `${Math.round(ms / 100) / 10} s` : `${ms} ms`);

export function specImporter(limits: ImportLimits): SpecImporter {
  const idle: Worker[] = [];
  const running = new Set<Worker>();
  const waiting: Array<() => void> = [];
  let started = 0;
  let busy = 0;
  let closed = false;

  const spawn = () => {
    started++;
    return new Worker(THREAD_URL, { resourceLimits: { maxOldGenerationSizeMb: limits.heapMb } });
  };

  // One document on one thread; the thread goes back to `idle` only if it answered.
  function runOn(worker: Worker, job: ImportJob): Promise<NormalizedSpec> {
    return new Promise((resolve, reject) => {
      let timedOut = false;
      let outOfMemory = false;
      const timer = setTimeout(() => {
        timedOut = true;
        void worker.terminate();
      }, limits.timeoutMs);
      const done = () => {
        clearTimeout(timer);
        worker.off('message', onMessage).off('error', onError).off('exit', onExit);
      };
      const onMessage = (reply: Reply) => {
        done();
        worker.unref();
        if (!closed) idle.push(worker);
        if (reply.ok) resolve(reply.spec);
        else if ('problem' in reply) reject(new DocumentProblem(reply.problem));
        else reject(new Error(`importing the document failed: ${reply.error}`));
      };
      const onError = (err: Error & { code?: string }) => {
        if (err.code === 'ERR_WORKER_OUT_OF_MEMORY') outOfMemory = true;
        else reject(err);
      };
      const onExit = () => {
        done();
        if (outOfMemory) reject(new DocumentProblem(`The document exceeded its memory budget (${limits.heapMb} MB) while it was read; make it smaller`));
        else if (timedOut) reject(new DocumentProblem(`The document exceeded its time budget (${seconds(limits.timeoutMs)}) while it was read; make it smaller`));
        else reject(shuttingDown());
      };
      worker.on('message', onMessage).on('error', onError).on('exit', onExit);
      worker.ref();
      worker.postMessage(job);
    });
  }

  // A finished document hands its slot to the first one waiting, so `busy` never passes `threads`.
  async function acquire(): Promise<void> {
    if (busy < limits.threads) {
      busy++;
      return;
    }
    if (waiting.length >= limits.queue) {
      throw new AppError('unavailable', `${limits.threads + limits.queue} documents are being read or waiting; try again shortly`, { retryAfter: Math.max(1, Math.ceil(limits.timeoutMs / 1000)) });
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
    const worker = idle.pop() ?? spawn();
    running.add(worker);
    try {
      return await runOn(worker, { text, format, options });
    } finally {
      running.delete(worker);
      release();
    }
  }

  return {
    importSpec,
    stats: () => ({ started, running: busy, waiting: waiting.length }),
    async close() {
      closed = true;
      for (const wake of waiting.splice(0)) wake();
      await Promise.all([...idle.splice(0), ...running].map((w) => w.terminate()));
    },
  };
}
