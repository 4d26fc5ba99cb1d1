/**
 * PGlite in a worker thread: an object with the interface Kysely's PGliteDialect drives
 * (query, transaction, close, ready), forwarding each call to a Worker that owns the real
 * database (pglite-worker.ts). PGlite runs a statement synchronously on its thread; on the
 * server's own thread a long one (an import's batch, a report) held every request. Only
 * connect.ts uses this module.
 *
 * Semantics are PGlite's own: the worker calls pglite.transaction and holds it open until
 * told to commit or roll back, so a transaction is exclusive and other queries wait for it.
 * Errors come back with every field PostgreSQL gives (code, constraint, detail, ...). If the
 * worker ends, every pending and later call fails with a connection error (SQLSTATE 08006),
 * which fromPgError answers as "database unavailable".
 */
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { Worker } from 'node:worker_threads';

export interface PgliteWorkerData {
  dataDir?: string;
  /** A dump (PGlite dumpDataDir) to start an in-memory database from; transferred, not copied. */
  dump?: ArrayBuffer;
  /** PGlite's WASM, compiled once per process instead of once per worker. */
  wasmModule?: WebAssembly.Module;
  fsBundle?: ArrayBuffer;
}

export type Request =
  | { id: number; op: 'query'; sql: string; params: unknown[]; rowMode: 'array' | 'object' | undefined; tx?: number }
  | { id: number; op: 'begin' }
  | { id: number; op: 'txRollback'; tx: number }
  | { id: number; op: 'end'; tx: number; commit: boolean }
  | { id: number; op: 'close' };

export interface WireError {
  name: string;
  message: string;
  stack?: string;
  fields: Record<string, string | number | boolean | null | undefined>;
}

export type Reply = { id: number; ok: true; value: unknown } | { id: number; ok: false; error: WireError };

/** Omit<Request, 'id'> over each member of the union. */
type Call = Request extends infer R ? (R extends Request ? Omit<R, 'id'> : never) : never;

interface QueryResults {
  rows: unknown[];
  affectedRows?: number;
  fields: { name: string; dataTypeID: number }[];
}

function rebuild(w: WireError): Error {
  const err = new Error(w.message);
  Object.assign(err, w.fields);
  if (w.fields.name === undefined) err.name = w.name;
  if (w.stack !== undefined) err.stack = w.stack;
  return err;
}

/** What a call gets when the worker is gone: a lost connection, as PostgreSQL's client would say. */
function workerGone(why: string): Error {
  return Object.assign(new Error(`Connection terminated: the PGlite worker ${why}`), { code: '08006', severity: 'FATAL' });
}

let artifacts: Promise<{ wasmModule: WebAssembly.Module; fsBundle: ArrayBuffer }> | undefined;

// The lib settings know WebAssembly's types, not its global.
const wasm = (globalThis as unknown as { WebAssembly: { compile(bytes: Uint8Array): Promise<WebAssembly.Module> } }).WebAssembly;

/**
 * PGlite's WASM compiled once per process and its file-system bundle read once: each worker
 * would otherwise compile its own copy (tests open one database per file, some many).
 */
function pgliteArtifacts(): Promise<{ wasmModule: WebAssembly.Module; fsBundle: ArrayBuffer }> {
  return (artifacts ??= (async () => {
    const dist = path.dirname(createRequire(import.meta.url).resolve('@electric-sql/pglite'));
    const [code, bundle] = await Promise.all([fs.promises.readFile(path.join(dist, 'pglite.wasm')), fs.promises.readFile(path.join(dist, 'pglite.data'))]);
    // Copied into an ArrayBuffer of its own: each worker gets a clone of it.
    return { wasmModule: await wasm.compile(code), fsBundle: new Uint8Array(bundle).buffer };
  })());
}

type Lane = 'ordinary' | 'bulk';

/** What Kysely's PGlite dialect drives, for the bulk lane (see PgliteThread.bulk). */
export interface PgliteThreadLane {
  readonly ready: boolean;
  readonly closed: boolean;
  waitReady: Promise<void>;
  close(): Promise<void>;
  query<T>(sql: string, params?: unknown[], options?: { rowMode?: 'array' | 'object' }): Promise<QueryResults & { rows: T[] }>;
  transaction<T>(callback: (tx: never) => Promise<T>): Promise<T>;
}

export interface PgliteThreadOptions {
  /** On-disk data directory; absent: in memory. */
  dataDir?: string;
  /** With no dataDir: the dump to start from. */
  initialDump?: Blob | undefined;
}

/** The PGlite interface of Kysely's dialect, served by a worker thread. */
export class PgliteThread {
  #worker: Worker | undefined;
  #pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  #nextId = 1;
  #gone: Error | undefined;
  #closing: Promise<void> | undefined;
  /** Calls of the ordinary lane waiting on the worker, and whether one was answered in this turn of the event loop. */
  #ordinary = 0;
  #answeredThisTurn = false;
  #bulk: PgliteThreadLane | undefined;
  ready = false;
  closed = false;
  readonly waitReady: Promise<void>;

  constructor(opts: PgliteThreadOptions) {
    this.waitReady = this.#start(opts);
    // Kysely awaits waitReady; a failure nobody asked about yet must not end the process.
    this.waitReady.catch(() => undefined);
  }

  async #start(opts: PgliteThreadOptions): Promise<void> {
    const { wasmModule, fsBundle } = await pgliteArtifacts();
    const dump = opts.initialDump === undefined ? undefined : await opts.initialDump.arrayBuffer();
    const data: PgliteWorkerData = { wasmModule, fsBundle, ...(opts.dataDir === undefined ? {} : { dataDir: opts.dataDir }), ...(dump ? { dump } : {}) };
    if (this.closed) throw workerGone('was closed before it started');
    const worker = new Worker(new URL(`./pglite-worker${path.extname(new URL(import.meta.url).pathname)}`, import.meta.url), {
      workerData: data,
      transferList: dump ? [dump] : [],
    });
    this.#worker = worker;
    const started = new Promise<unknown>((resolve, reject) => this.#pending.set(0, { resolve, reject }));
    this.#hold();
    worker.on('message', (r: Reply) => {
      const p = this.#pending.get(r.id);
      if (p === undefined) return;
      this.#pending.delete(r.id);
      this.#hold();
      if (r.ok) p.resolve(r.value);
      else p.reject(rebuild(r.error));
    });
    worker.on('error', (err) => this.#fail(workerGone(`failed: ${err.message}`)));
    worker.on('exit', (code) => this.#fail(workerGone(`exited (code ${code})`)));
    await started;
    this.ready = true;
  }

  /**
   * The worker keeps the process alive only while a call waits on it, as an in-thread PGlite
   * (no handles of its own) would: a script that forgot db.destroy() still exits, and one
   * awaiting a query does not exit under it.
   */
  #hold(): void {
    if (this.#pending.size > 0) this.#worker?.ref();
    else this.#worker?.unref();
  }

  #fail(err: Error): void {
    this.#gone ??= err;
    this.closed = true;
    const pending = [...this.#pending.values()];
    this.#pending.clear();
    for (const p of pending) p.reject(this.#gone);
  }

  async #call(c: Call, lane: Lane = 'ordinary'): Promise<unknown> {
    await this.waitReady;
    if (lane === 'bulk') await this.#ordinaryIdle();
    if (this.#gone) throw this.#gone;
    const id = this.#nextId++;
    const answer = new Promise<unknown>((resolve, reject) => this.#pending.set(id, { resolve, reject }));
    this.#hold();
    try {
      this.#worker!.postMessage({ ...c, id });
    } catch (err) {
      // A parameter that cannot be cloned (a function, a symbol): this call fails, nothing else.
      this.#pending.delete(id);
      this.#hold();
      throw err;
    }
    if (lane === 'bulk') return answer;
    this.#ordinary++;
    return answer.finally(() => {
      this.#ordinary--;
      this.#answeredThisTurn = true;
      setImmediate(() => (this.#answeredThisTurn = false));
    });
  }

  /**
   * Resolves when no ordinary call waits on the worker and none was answered in this turn of
   * the event loop (a request's next statement is sent from the previous one's answer, in the
   * same turn), or after BULK_MAX_WAIT_MS: bulk work is held back, never starved.
   */
  async #ordinaryIdle(): Promise<void> {
    const until = performance.now() + BULK_MAX_WAIT_MS;
    while ((this.#ordinary > 0 || this.#answeredThisTurn) && performance.now() < until && !this.#gone) {
      await new Promise((resolve) => setTimeout(resolve, 1));
    }
  }

  /**
   * The same database for bulk work (an import's batches): each of its calls waits until the
   * ordinary lane is idle, so a request's statements go before the next batch and a request
   * waits for at most the batch already running, not one between each of its statements.
   * Closing it closes nothing: the database belongs to this object.
   */
  bulk(): PgliteThreadLane {
    return (this.#bulk ??= {
      get ready() {
        return true;
      },
      get closed() {
        return false;
      },
      waitReady: this.waitReady,
      close: async () => undefined,
      query: <T>(sql: string, params: unknown[] = [], options: { rowMode?: 'array' | 'object' } = {}) =>
        this.#call({ op: 'query', sql, params, rowMode: options.rowMode }, 'bulk') as Promise<QueryResults & { rows: T[] }>,
      transaction: () => Promise.reject(new Error('The bulk lane runs single statements, not transactions')),
    });
  }

  query<T>(sql: string, params: unknown[] = [], options: { rowMode?: 'array' | 'object' } = {}, tx?: number): Promise<QueryResults & { rows: T[] }> {
    return this.#call({ op: 'query', sql, params, rowMode: options.rowMode, ...(tx === undefined ? {} : { tx }) }) as Promise<QueryResults & { rows: T[] }>;
  }

  /** PGlite's transaction: the callback's queries run inside it; commit when it resolves, rollback when it throws. */
  async transaction<T>(callback: (tx: { query: PgliteThread['query']; rollback: () => Promise<void> }) => Promise<T>): Promise<T> {
    const txId = (await this.#call({ op: 'begin' })) as number;
    const tx = {
      query: <R>(sql: string, params?: unknown[], options?: { rowMode?: 'array' | 'object' }) => this.query<R>(sql, params, options, txId),
      rollback: async () => {
        await this.#call({ op: 'txRollback', tx: txId });
      },
    };
    let value: T;
    try {
      value = await callback(tx);
    } catch (err) {
      await this.#call({ op: 'end', tx: txId, commit: false }).catch(() => undefined);
      throw err;
    }
    await this.#call({ op: 'end', tx: txId, commit: true });
    return value;
  }

  /** Ends the worker at once, as a crash would (its database is not closed): what tests of a lost worker use. */
  async terminate(): Promise<void> {
    await this.waitReady.catch(() => undefined);
    await this.#worker?.terminate();
  }

  /** Closes the database and ends the worker; a worker that does not answer in time is terminated all the same. */
  close(): Promise<void> {
    return (this.#closing ??= (async () => {
      const worker = this.#worker;
      if (!this.#gone) {
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([
          this.#call({ op: 'close' }).catch(() => undefined),
          new Promise((resolve) => {
            timer = setTimeout(resolve, CLOSE_WAIT_MS);
          }),
        ]);
        clearTimeout(timer);
      }
      this.#fail(workerGone('was closed'));
      await (worker ?? this.#worker)?.terminate();
    })());
  }
}

/** The longest a bulk call waits for the ordinary lane to go idle before it goes anyway. */
const BULK_MAX_WAIT_MS = 1000;

/** How long close() lets PGlite finish its statement and checkpoint before the worker is terminated. */
const CLOSE_WAIT_MS = 10_000;
