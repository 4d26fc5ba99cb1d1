/**
 * The worker thread that owns a PGlite database (see pglite-thread.ts, its only user). A
 * statement runs here, so however long it takes, the server's event loop keeps answering.
 * Messages are handled as they come; PGlite's own mutex orders them, as it does in-thread.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { PGlite, type Transaction } from '@electric-sql/pglite';
import type { PgliteWorkerData, Reply, Request, WireError } from './pglite-thread.ts';

const port = parentPort!;
const data = workerData as PgliteWorkerData;

/** An error as the main thread rebuilds it: every field of a PostgreSQL error (code, constraint, detail, ...), plus name, message and stack. */
function wireError(err: unknown): WireError {
  if (!(err instanceof Error)) return { name: 'Error', message: String(err), fields: {} };
  const fields: WireError['fields'] = {};
  // Own properties only (DatabaseError's fields are own; its query options may hold functions).
  for (const [k, v] of Object.entries(err)) {
    if (v === undefined || v === null || typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') fields[k] = v;
  }
  return { name: err.name, message: err.message, ...(err.stack === undefined ? {} : { stack: err.stack }), fields };
}

const reply = (r: Reply) => port.postMessage(r);

/** Open transactions by id: the worker holds each inside pglite.transaction until the main thread ends it. */
const transactions = new Map<number, { tx: Transaction; end: (commit: boolean) => void; closed: Promise<void> }>();
let nextTx = 1;
const ROLLBACK = Symbol('rollback');

const pglite = new PGlite({
  ...(data.dataDir === undefined ? {} : { dataDir: data.dataDir }),
  ...(data.dump === undefined ? {} : { loadDataDir: new Blob([data.dump]) }),
  ...(data.wasmModule === undefined ? {} : { pgliteWasmModule: data.wasmModule }),
  ...(data.fsBundle === undefined ? {} : { fsBundle: new Blob([data.fsBundle]) }),
});

pglite.waitReady.then(
  () => reply({ id: 0, ok: true, value: undefined }),
  (err: unknown) => reply({ id: 0, ok: false, error: wireError(err) }),
);

function begin(id: number): void {
  const txId = nextTx++;
  let end!: (commit: boolean) => void;
  const decided = new Promise<boolean>((resolve) => (end = resolve));
  // pglite.transaction itself: its BEGIN, its exclusive hold of the database (other queries
  // wait), its COMMIT or ROLLBACK, and its errors, exactly as in-thread.
  const closed = pglite
    .transaction(async (tx) => {
      transactions.set(txId, { tx, end, closed });
      reply({ id, ok: true, value: txId });
      if (!(await decided)) throw ROLLBACK;
    })
    .then(
      () => undefined,
      (err: unknown) => {
        if (err !== ROLLBACK) throw err;
      },
    );
  // A failure before the callback ran (BEGIN refused) answers the begin itself.
  closed.catch((err: unknown) => {
    if (!transactions.has(txId)) reply({ id, ok: false, error: wireError(err) });
  });
}

async function handle(m: Request): Promise<unknown> {
  switch (m.op) {
    case 'query': {
      const on = m.tx === undefined ? pglite : transactions.get(m.tx)?.tx;
      if (on === undefined) throw new Error('The transaction has ended');
      const r = await on.query(m.sql, m.params, { rowMode: m.rowMode });
      return { rows: r.rows, affectedRows: r.affectedRows, fields: r.fields.map((f) => ({ name: f.name, dataTypeID: f.dataTypeID })) };
    }
    case 'txRollback':
      return transactions.get(m.tx)?.tx.rollback();
    case 'end': {
      const t = transactions.get(m.tx);
      if (t === undefined) return undefined;
      t.end(m.commit);
      try {
        await t.closed;
      } finally {
        transactions.delete(m.tx);
      }
      return undefined;
    }
    case 'close':
      if (!pglite.closed) await pglite.close();
      return undefined;
  }
}

port.on('message', (m: Request) => {
  if (m.op === 'begin') return begin(m.id);
  handle(m).then(
    (value) => reply({ id: m.id, ok: true, value }),
    (err: unknown) => reply({ id: m.id, ok: false, error: wireError(err) }),
  );
});
