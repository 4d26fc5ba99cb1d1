/**
 * `tributary facts export --data-model SLUG --format ndjson|csv [...]`: every fact factQuery
 * matches, as the SDK's factPages reads them (keyset pages of factQuery, as the service
 * account), written page by page to stdout or --output FILE. One page is in memory at a
 * time: the next is asked for once the last one is written and the output has drained.
 * A terminal gets a progress line on stderr. --output writes a file next to FILE and renames
 * it at the end, so a failed export leaves no half a file under FILE's name.
 */
import fs from 'node:fs';
import path from 'node:path';
import { once } from 'node:events';
import type { Writable } from 'node:stream';
import { Option, type Command } from 'commander';
import type { Fact, FactExportVariables } from '../../packages/client/src/index.ts';
import { apiClientOf, asResource, type ApiClient } from './api-client.ts';
import { CommandFailure, reportFailure, UsageError } from './admin-client.ts';
import { csvHeader, csvRecord, csvRow } from './csv.ts';

type Io = {
  out: (s: string) => void;
  err: (s: string) => void;
  errIsTTY?: () => boolean;
};

export interface ExportOptions {
  dataModel: string;
  since?: string;
  until?: string;
  mode: 'latest' | 'timeline';
  timeAxis: 'observed_at' | 'inserted_at';
  filters?: string;
  format: 'ndjson' | 'csv';
  output?: string;
}

/** An NDJSON line of a fact: the fact's own members in snake case, as the API's JSON names them, and its data. */
export function ndjsonLine(f: Fact): string {
  return `${JSON.stringify({ id: f.id, entity_id: f.entityId, observed_at: f.observedAt, inserted_at: f.insertedAt, data: f.data })}\n`;
}

function checkInstant(value: string | undefined, option: string): void {
  if (value !== undefined && Number.isNaN(Date.parse(value)))
    throw new UsageError(`${option} must be an ISO 8601 date-time such as 2026-07-01T00:00:00Z, not ${JSON.stringify(value)}`);
}

/**
 * The model's field names in the order they were added (ties by name), for the CSV header. Looked up for
 * NDJSON too: an unknown slug is said with its name before any fact is asked for.
 */
async function fieldNames(client: ApiClient, slug: string): Promise<string[]> {
  const models = await client.list('data_models', { filter: { slug } });
  const model = models.data[0];
  if (!model) throw new CommandFailure(`no data model "${slug}" in the account's workspace`, 'not_found');
  const fields: Array<{ name: string; at: string }> = [];
  for await (const f of client.iterate('data_model_fields', { filter: { data_model_id: model.id }, page: { limit: 100 } })) {
    const { name, inserted_at: at } = asResource(f).attributes;
    fields.push({ name: String(name), at: String(at) });
  }
  // Fields added in one request share an instant: their names order them.
  fields.sort((a, b) => (a.at < b.at ? -1 : a.at > b.at ? 1 : a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return fields.map((f) => f.name);
}

function progress(io: Io, enabled: boolean, clock: () => number) {
  let last = 0;
  let shown = false;
  return {
    update(n: number, upTo: string | undefined) {
      const now = clock();
      if (!enabled || now - last < 100) return;
      last = now;
      shown = true;
      io.err(`\r\x1b[2K${n.toLocaleString('en-US')} ${n === 1 ? 'fact' : 'facts'}${upTo ? `, up to ${upTo}` : ''}`);
    },
    clear() {
      if (shown) io.err('\r\x1b[2K');
    },
  };
}

/**
 * Streams the facts of `o` into `sink` and resolves with their number. A reader that stops
 * reading (`| head`, a closed pipe) ends the export as done; other errors of `sink` fail it.
 */
export async function exportFacts(client: ApiClient, o: ExportOptions, sink: Writable, io: Io, clock: () => number = Date.now): Promise<number> {
  checkInstant(o.since, '--since');
  checkInstant(o.until, '--until');
  const fields = await fieldNames(client, o.dataModel);
  const variables: FactExportVariables = { dataModelSlug: o.dataModel, mode: o.mode, timeAxis: o.timeAxis };
  if (o.since !== undefined) variables.since = o.since;
  if (o.until !== undefined) variables.until = o.until;
  if (o.filters !== undefined) variables.filters = o.filters;

  let failed: Error | undefined;
  const onError = (err: Error) => (failed ??= err);
  sink.on('error', onError);
  const bar = progress(io, (io.errIsTTY ?? (() => process.stderr.isTTY === true))(), clock);
  let n = 0;
  const closed = (err: unknown) => (err as NodeJS.ErrnoException).code === 'EPIPE';
  /** Writes and waits for the output to drain when its buffer is full: the reader sets the pace. */
  const put = async (text: string) => {
    if (failed) throw failed;
    if (!sink.write(text) && !sink.destroyed) await once(sink, 'drain');
    if (failed) throw failed;
  };
  try {
    if (o.format === 'csv') await put(csvRecord(csvHeader(fields)));
    for await (const page of client.factPages(variables)) {
      await put(page.map((f) => (o.format === 'csv' ? csvRow(f, fields) : ndjsonLine(f))).join(''));
      n += page.length;
      const last = page[page.length - 1]!;
      bar.update(n, o.mode === 'timeline' && o.timeAxis === 'inserted_at' ? last.insertedAt : last.observedAt);
    }
  } catch (err) {
    if (!closed(err)) throw err;
  } finally {
    bar.clear();
    sink.off('error', onError);
  }
  return n;
}

/** An export into FILE: written beside it, renamed onto it once complete. */
async function exportToFile(client: ApiClient, o: ExportOptions & { output: string }, io: Io): Promise<number> {
  const target = path.resolve(o.output);
  const partial = path.join(path.dirname(target), `.${path.basename(target)}.${process.pid}.partial`);
  let sink: fs.WriteStream;
  try {
    sink = fs.createWriteStream(partial, { flags: 'wx' });
    await once(sink, 'open');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new CommandFailure(
      `cannot write ${o.output}: ${code === 'ENOENT' ? 'no such directory' : code === 'EACCES' ? 'permission denied' : (code ?? 'unwritable')}`,
      'file_unwritable',
    );
  }
  try {
    const n = await exportFacts(client, o, sink, io);
    sink.end();
    await once(sink, 'finish');
    fs.renameSync(partial, target);
    return n;
  } catch (err) {
    sink.destroy();
    fs.rmSync(partial, { force: true });
    throw err;
  }
}

export function registerExportCommand(facts: Command, program: Command, io: Io): void {
  facts
    .command('export')
    .description('stream every fact of a data model that factQuery matches, as NDJSON or CSV, as the service account')
    .requiredOption('--data-model <slug>', "slug of the data model in the account's workspace")
    .addOption(new Option('--format <format>', 'ndjson: one JSON object a line; csv: RFC 4180 with a header').choices(['ndjson', 'csv']).makeOptionMandatory())
    .addOption(new Option('--mode <mode>', 'latest: one current fact per entity; timeline: every fact').choices(['latest', 'timeline']).default('latest'))
    .addOption(new Option('--time-axis <axis>', 'the axis of --since, --until and of "latest"').choices(['observed_at', 'inserted_at']).default('observed_at'))
    .option('--since <iso>', 'inclusive start (timeline default: the earliest fact)')
    .option('--until <iso>', 'timeline: exclusive end (default: now); latest: as of this instant')
    .option('--filters <json>', 'factQuery filters: a JSON array of at most 20 {field, op, value}')
    .option('--output <file>', 'write to FILE (complete or not at all) instead of stdout')
    .action(async (o: ExportOptions) => {
      const asJson = program.opts().json === true;
      try {
        const client = apiClientOf(program);
        if (o.output !== undefined) {
          const n = await exportToFile(client, { ...o, output: o.output }, io);
          io.out(asJson ? `${JSON.stringify({ exported: n, output: o.output })}\n` : `exported: ${n} facts to ${o.output}\n`);
        } else {
          await exportFacts(client, o, process.stdout, io);
        }
      } catch (err) {
        // On stdout the facts are the document: a failure is said on stderr whatever --json says.
        reportFailure(err, asJson && o.output !== undefined, io);
      }
    });
}
