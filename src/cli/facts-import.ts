/**
 * `tributary facts import --workspace WS_ID --data-model SLUG FILE.ndjson [--json]`: streams
 * the file to the admin API (POST /admin/v1/facts/import) without holding it in memory,
 * with a progress bar on stderr when stderr is a terminal, then prints the summary
 * (written, duplicates, rejected lines with their numbers and reasons), or with --json the
 * server's answer as one JSON document. A file with rejected lines exits 0 (the valid lines
 * are stored, and the answer says which were not), or 1 with --strict.
 */
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import { Transform, type Readable, type TransformCallback } from 'node:stream';
import { CommanderError, type Command } from 'commander';
import { AdminApiError, CommandFailure, EXIT_FAILURE, errorFromBody, networkReason, reportFailure, resolveClientSettings } from './admin-client.ts';
import { registerExportCommand } from './facts-export.ts';
import { LINES_STORED_HEADER, PROGRESS_REQUEST_HEADER, PROGRESS_REQUEST_VALUE } from '../facts/import-progress.ts';

type Io = {
  out: (s: string) => void;
  err: (s: string) => void;
  /** Whether `err` writes to a terminal; defaults to process.stderr.isTTY. */
  errIsTTY?: () => boolean;
};

interface ImportAnswer {
  lines?: number;
  written: number;
  duplicates: number;
  rejected: number;
  errors: Array<{ line: number; pointer?: string; detail: string }>;
  errors_omitted?: number;
}

function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v.toFixed(1)} ${units[i]}`;
}

/** One line of progress, redrawn in place with \r. */
export function progressLine(sent: number, total: number, width = 30): string {
  const frac = total > 0 ? Math.min(1, sent / total) : 1;
  const filled = Math.round(frac * width);
  return `[${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${String(Math.floor(frac * 100)).padStart(3)}% ${formatBytes(sent)} / ${formatBytes(total)}`;
}

/** Counts the bytes fetch has pulled from the file: with backpressure, about what was sent. */
class ByteCounter extends Transform {
  bytes = 0;
  private readonly onProgress: (bytes: number) => void;

  constructor(onProgress: (bytes: number) => void) {
    super();
    this.onProgress = onProgress;
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.bytes += chunk.length;
    this.onProgress(this.bytes);
    callback(null, chunk);
  }
}

function progressReporter(io: Io, total: number, enabled: boolean) {
  let last = 0;
  let shown = false;
  const draw = (text: string) => {
    shown = true;
    io.err(`\r\x1b[2K${text}`);
  };
  return {
    update(bytes: number) {
      const now = Date.now();
      if (!enabled || (now - last < 100 && bytes < total)) return;
      last = now;
      draw(progressLine(bytes, total));
    },
    waiting() {
      if (enabled) draw(`${progressLine(total, total)} sent; waiting for the server to finish`);
    },
    clear() {
      if (shown) io.err('\r\x1b[2K');
    },
  };
}

export function renderImportSummary(a: ImportAnswer): string {
  let s = `written: ${a.written}\nduplicates: ${a.duplicates}\nrejected: ${a.rejected}\n`;
  for (const e of a.errors) s += `  line ${e.line}: ${e.pointer ? `${e.pointer} ` : ''}${e.detail}\n`;
  if (a.errors_omitted) s += `  ... and ${a.errors_omitted} more errors\n`;
  return s;
}

/** Why an upload got no answer: whether it had reached the server, and how many lines the server said it had stored. */
class NoAnswer extends Error {
  readonly connected: boolean;
  readonly linesStored: number | undefined;

  constructor(cause: unknown, connected: boolean, linesStored: number | undefined) {
    super('no answer', { cause });
    this.connected = connected;
    this.linesStored = linesStored;
  }
}

/**
 * POSTs `body` and resolves with the answer. node:http rather than fetch: undici's fetch
 * keeps every chunk of a streamed request body until the request ends
 * (nodejs/undici#4058), which would hold the whole file in memory. Here `pipe` waits for
 * the socket to drain, so at most a few chunks are in flight. An answer that comes before
 * the body is all sent (the server refusing the upload early) is still the answer. The
 * server's interim 102 answers say how many lines are stored so far.
 */
function post(url: URL, headers: Record<string, string>, body: Readable): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    let answered = false;
    let connected = false;
    let linesStored: number | undefined;
    const req = (url.protocol === 'https:' ? https : http).request(
      url,
      { method: 'POST', headers: { ...headers, [PROGRESS_REQUEST_HEADER]: PROGRESS_REQUEST_VALUE } },
      (res) => {
        answered = true;
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') });
          // Answered before the whole body was sent (a refusal): stop sending, or the process
          // waits on a socket the server no longer reads until the server's idle timeout.
          body.unpipe(req);
          req.destroy();
        });
        res.on('error', (err) => reject(new NoAnswer(err, true, linesStored)));
      },
    );
    req.on('socket', (socket) => {
      if (socket.connecting) socket.once('connect', () => (connected = true));
      else connected = true;
    });
    req.on('information', (info) => {
      const n = Number(info.headers[LINES_STORED_HEADER]);
      if (Number.isSafeInteger(n) && n >= 0) linesStored = n;
    });
    req.on('error', (err) => {
      if (!answered) reject(new NoAnswer(err, connected, linesStored));
    });
    body.on('error', (err) => req.destroy(err));
    body.pipe(req);
  });
}

/** What to tell the user when an upload got no answer. */
function noAnswerError(err: unknown, url: string): AdminApiError {
  const failure = err instanceof NoAnswer ? err : new NoAnswer(err, false, undefined);
  const { code, reason } = networkReason(failure.cause);
  if (failure.connected) {
    const n = failure.linesStored ?? 0;
    return new AdminApiError(
      `the server closed the connection after ${n} lines were stored${reason ? ` (${reason})` : ''}; run the same import again when the server is back: stored lines count as duplicates`,
      null,
      'connection_closed',
    );
  }
  return new AdminApiError(
    `cannot reach the server at ${url}${code ? ` (${code})` : ''}`,
    null,
    code === 'ECONNREFUSED' ? 'connection_refused' : 'connection_failed',
  );
}

export async function upload(settings: { url: string; adminToken: string }, workspace: string, dataModel: string, file: string, io: Io): Promise<ImportAnswer> {
  const total = fs.statSync(file).size;
  const progress = progressReporter(io, total, (io.errIsTTY ?? (() => process.stderr.isTTY === true))());
  const counter = new ByteCounter((bytes) => progress.update(bytes));
  const source = fs.createReadStream(file);
  source.on('error', (err) => counter.destroy(err));
  source.on('end', () => progress.waiting());
  const query = new URLSearchParams({ workspace_id: workspace, data_model: dataModel });
  let res: { status: number; text: string };
  try {
    res = await post(
      new URL(`${settings.url}/admin/v1/facts/import?${query}`),
      { authorization: `Bearer ${settings.adminToken}`, 'content-type': 'application/x-ndjson', accept: 'application/json' },
      source.pipe(counter),
    );
  } catch (err) {
    progress.clear();
    throw noAnswerError(err, settings.url);
  } finally {
    source.destroy();
  }
  const { status, text } = res;
  progress.clear();
  if (status < 200 || status > 299) throw errorFromBody(status, text);
  let data: unknown;
  try {
    data = (JSON.parse(text) as { data?: unknown }).data;
  } catch {
    throw new AdminApiError(`the server at ${settings.url} answered with something other than JSON`, status, 'bad_response');
  }
  if (!data || typeof data !== 'object' || typeof (data as ImportAnswer).written !== 'number') {
    throw new AdminApiError(`the server at ${settings.url} answered without an import summary`, status, 'bad_response');
  }
  return data as ImportAnswer;
}

/** Why a file cannot be imported, in words, or undefined when it can be read. */
function unreadable(file: string): string | undefined {
  try {
    if (!fs.statSync(file).isFile()) return `${file} is not a file`;
    fs.accessSync(file, fs.constants.R_OK);
    return undefined;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? 'no such file' : code === 'EACCES' || code === 'EPERM' ? 'permission denied' : (code ?? 'unreadable');
    return `cannot read ${file}: ${why}`;
  }
}

export function registerFactsCommands(program: Command, io: Io): void {
  const json = () => program.opts().json === true;
  const facts = program.command('facts').description('facts of data models');
  facts
    .command('import')
    .description('import facts from an NDJSON file, one {"observed_at", "data", "source_key"?} per line')
    .requiredOption('--workspace <workspace-id>', 'workspace id')
    .requiredOption('--data-model <slug>', 'slug of the data model in that workspace')
    .option('--strict', 'exit 1 when any line is rejected (the valid lines are still stored)')
    .argument('<file>', 'NDJSON file')
    .action(async (file: string, o: { workspace: string; dataModel: string; strict?: boolean }) => {
      const asJson = json();
      try {
        const why = unreadable(file);
        if (why) throw new CommandFailure(why, 'file_unreadable');
        const { url, adminToken } = program.opts() as { url?: string; adminToken?: string };
        const answer = await upload(resolveClientSettings({ url, adminToken }), o.workspace, o.dataModel, file, io);
        io.out(asJson ? `${JSON.stringify(answer)}\n` : renderImportSummary(answer));
        if (o.strict && answer.rejected > 0) {
          // The summary above is the document; the exit code and this line say the file was not clean.
          if (!asJson) io.err(`error: ${answer.rejected} of ${answer.lines ?? '?'} lines were rejected (--strict)\n`);
          throw new CommanderError(EXIT_FAILURE, 'tributary.rejectedLines', 'lines were rejected');
        }
      } catch (err) {
        if (err instanceof CommanderError) throw err;
        reportFailure(err, asJson, io);
      }
    });
  registerExportCommand(facts, program, io);
}
