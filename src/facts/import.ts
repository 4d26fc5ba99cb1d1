/**
 * Fact import: NDJSON lines `{"observed_at": ..., "data": {...}, "source_key"?: ...}`,
 * read as a stream and written through writeFacts in batches, each batch one statement
 * (atomic on its own). A bad line is reported with its number and skipped, never fatal. Memory
 * stays bounded by one batch whatever the size of the input.
 */
import type { Metrics } from '../metrics.ts';
import { setImmediate as nextTurn } from 'node:timers/promises';
import type { Db } from '../db/connect.ts';
import { AppError, UNSTORABLE_TEXT } from '../errors.ts';
import { isUuid } from '../ids.ts';
import { SLUG_RE } from '../input.ts';
import { jsonDepthExceeds, MAX_JSON_DEPTH, mayHoldUnstorableText, unstorableTextAt } from '../json.ts';
import { findImportWorkspace } from './facts.sql.ts';
import { loadModel } from './models.sql.ts';
import { MAX_LINE_BYTES, type NdjsonLine } from './ndjson.ts';
import { writeFacts, type FactInput } from './write.ts';

/**
 * How batches are sized (each batch one statement). `lines` is the most lines in a batch.
 * PGlite is one connection, in its own thread: while a batch's statement runs, every other
 * request's query waits for it; and this thread validates a batch's lines in one go, which
 * every request (even /healthz) waits for. A count of lines bounds neither (a statement
 * slows as the tables grow), so on PGlite each batch is sized from the time the last ones
 * took per line, validation and statement, aiming at `ms`. 60 ms: the import writes on the
 * bulk lane (deps.bulkDb), whose statements wait until no request's statement waits, so a
 * read waits for the batch already running, not for one between each of its statements;
 * longer batches spread the statement's fixed cost (about 2 ms of CPU) over more lines.
 */
export interface ImportBatching {
  lines: number;
  /** Aim each batch's write (validation and statement) at this many milliseconds, sizing it between MIN_BATCH_LINES and `lines`. */
  ms?: number;
}
export const IMPORT_BATCH: Record<'postgres' | 'pglite', ImportBatching> = {
  postgres: { lines: 1000 },
  pglite: { lines: 1000, ms: 60 },
};
/** The fewest lines in a timed batch (a statement's fixed cost is paid per batch); the first one has FIRST_TIMED_BATCH. */
export const MIN_BATCH_LINES = 10;
const FIRST_TIMED_BATCH = 50;
/** The answer lists this many errors; the rest are counted in errors_omitted. */
export const MAX_LISTED_ERRORS = 1000;

export interface ImportError {
  line: number;
  pointer?: string;
  detail: string;
}

export interface ImportResult {
  /** Lines read, blank ones included, so error line numbers can be checked against it. */
  lines: number;
  written: number;
  duplicates: number;
  /** Lines not written because they were not JSON or not a valid fact. */
  rejected: number;
  errors: ImportError[];
  errors_omitted: number;
}

export interface ImportTarget {
  workspaceId: unknown;
  dataModelSlug: unknown;
}

/** The workspace and data model an import writes to; 404 when either is unknown. */
export async function resolveImportTarget(db: Db, target: ImportTarget) {
  if (!isUuid(target.workspaceId)) throw new AppError('invalid_query', 'workspace_id must be a workspace id', { source: { parameter: 'workspace_id' } });
  if (typeof target.dataModelSlug !== 'string' || !SLUG_RE.test(target.dataModelSlug)) {
    throw new AppError('invalid_query', 'data_model must be the slug of a data model', { source: { parameter: 'data_model' } });
  }
  const workspace = await findImportWorkspace(db, target.workspaceId.toLowerCase());
  if (!workspace) throw new AppError('not_found', 'No workspace with this id');
  const model = await loadModel(db, workspace.id, target.dataModelSlug);
  if (!model) throw new AppError('not_found', `No data model with slug "${target.dataModelSlug}" in this workspace`);
  return { scope: { organizationId: workspace.organization_id, workspaceId: workspace.id }, model };
}

type Parsed = { item: unknown } | { error: string; pointer?: string };

function parseLine(text: string): Parsed {
  // The same nesting limit as JSON bodies, checked before JSON.parse allocates anything.
  if (jsonDepthExceeds(text, MAX_JSON_DEPTH)) return { error: `the line is nested deeper than ${MAX_JSON_DEPTH} levels` };
  try {
    // Plain JSON.parse: it defines members as own data properties, so a `__proto__`
    // member never reaches a prototype, and the validator rejects it as an unknown member.
    const item: unknown = JSON.parse(text);
    const at = mayHoldUnstorableText(text) ? unstorableTextAt(item) : undefined;
    return at === undefined ? { item } : { error: UNSTORABLE_TEXT, pointer: at };
  } catch (err) {
    const why = err instanceof SyntaxError ? err.message : 'unreadable';
    return { error: `the line is not JSON: ${why.length > 200 ? `${why.slice(0, 200)}...` : why}` };
  }
}

/**
 * Imports `lines` (text lines, or a too-long line's marker, as ndjsonLines reads them from a
 * request) into one data model. Lines are numbered from 1; blank lines are skipped.
 * Lines done are stored for good: a failure later leaves them stored.
 */
export async function importFacts(
  db: Db,
  target: Awaited<ReturnType<typeof resolveImportTarget>>,
  lines: AsyncIterable<NdjsonLine> | Iterable<NdjsonLine>,
  opts: {
    /** How batches are sized (IMPORT_BATCH[engine]); each batch its own statement. */
    batching?: ImportBatching;
    /** Called after each batch but the last is committed, with the number of lines done so far. */
    onBatch?: (linesDone: number) => void;
    /** Where facts written and lines read are counted. */
    metrics?: Pick<Metrics, 'factsWritten' | 'importLines'>;
  } = {},
): Promise<ImportResult> {
  const batching = opts.batching ?? IMPORT_BATCH.postgres;
  const targetMs = batching.ms;
  let batchSize = targetMs === undefined ? batching.lines : Math.min(FIRST_TIMED_BATCH, batching.lines);
  // Milliseconds per line of the recent batches (a moving average: one slow batch, a
  // collection or a checkpoint, shrinks the next ones without collapsing them).
  let msPerLine: number | undefined;
  const result: ImportResult = { lines: 0, written: 0, duplicates: 0, rejected: 0, errors: [], errors_omitted: 0 };
  const addError = (e: ImportError) => {
    if (result.errors.length < MAX_LISTED_ERRORS) result.errors.push(e);
    else result.errors_omitted++;
  };

  // Lines since the last flush, in order; a bad line waits here with its error so that
  // errors are listed (and the first MAX_LISTED_ERRORS kept) in line order.
  let pending: Array<{ line: number; item: unknown } | { line: number; error: string; pointer?: string }> = [];
  const flush = async () => {
    if (pending.length === 0) return;
    const chunk = pending;
    pending = [];
    const parsed = chunk.filter((l): l is { line: number; item: unknown } => 'item' in l);
    // writeFacts reports by position among the parsed lines; the answer reports by line number.
    const invalid = new Map<number, ImportError[]>();
    if (parsed.length > 0) {
      // No transaction around the batch: its write is one statement, atomic on its own, so
      // BEGIN and COMMIT were two more round trips a batch, and the connection (PGlite's
      // only one) was held while this thread validated the lines. Timed: the validation on
      // this thread, which /healthz waits for, and the statement, which a read waits for.
      const started = performance.now();
      const r = await writeFacts(
        db,
        target.scope,
        target.model,
        parsed.map((l) => l.item as FactInput),
        opts.metrics,
      );
      if (targetMs !== undefined) {
        const per = (performance.now() - started) / chunk.length;
        msPerLine = msPerLine === undefined ? per : 0.7 * msPerLine + 0.3 * per;
        batchSize = Math.max(MIN_BATCH_LINES, Math.min(batching.lines, Math.floor(targetMs / msPerLine)));
      }
      result.written += r.written;
      result.duplicates += r.duplicates;
      for (const e of r.errors) {
        const line = parsed[e.index]!.line;
        invalid.set(line, [...(invalid.get(line) ?? []), { line, pointer: e.pointer, detail: e.detail }]);
      }
    }
    for (const l of chunk) {
      const errs = 'error' in l ? [{ line: l.line, ...(l.pointer === undefined ? {} : { pointer: l.pointer }), detail: l.error }] : (invalid.get(l.line) ?? []);
      if (errs.length > 0) result.rejected++;
      for (const e of errs) addError(e);
    }
  };

  for await (const raw of lines) {
    const n = ++result.lines;
    opts.metrics?.importLines(1);
    let parsed: Parsed;
    if (typeof raw === 'string') {
      // A byte-order mark is not part of the first line's JSON.
      const text = n === 1 && raw.charCodeAt(0) === 0xfeff ? raw.slice(1) : raw;
      if (text.trim() === '') continue;
      parsed = parseLine(text);
    } else {
      parsed = { error: `the line is longer than ${MAX_LINE_BYTES} bytes` };
    }
    pending.push('error' in parsed ? { line: n, ...parsed } : { line: n, item: parsed.item });
    if (pending.length >= batchSize) {
      await flush();
      opts.onBatch?.(result.lines);
      // A turn of the event loop between batches. Without it the next lines, already read
      // from the socket, and the next statement may run on from the same callback (PGlite
      // in-thread settled a statement's promise without waiting on I/O), and no other
      // request would be read until the body is done.
      await nextTurn();
    }
  }
  await flush();
  return result;
}
