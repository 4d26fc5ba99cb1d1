/**
 * The cost of a log line: the same request lines through pino as configured before log
 * redaction (no hook) and as createLogger configures it now (redaction of every finished
 * line; the readable format), into a stream that discards them. Prints a Markdown table of
 * CPU time per line.
 * Settings: BENCH_LOG_LINES (per pass, default 100000).
 */
import os from 'node:os';
import { Writable } from 'node:stream';
import pino, { type Logger } from 'pino';
import { createLogger, LOG_REDACT } from '../src/log.ts';
import { randomSecret, SECRET_PREFIX } from '../src/secrets.ts';
import { intEnv } from './common.ts';

const LINES = intEnv('BENCH_LOG_LINES', 100_000, 1_000, 10_000_000);

let bytes = 0;
const sink = new Writable({
  write(chunk: Buffer | string, _enc, done) {
    bytes += chunk.length;
    done();
  },
});

const secret = randomSecret(SECRET_PREFIX.clientSecret);
type Scenario = (log: Logger) => void;
const scenarios: Record<string, Scenario> = {
  'request lines (incoming + completed)': (log) => {
    log.info(
      { req: { method: 'GET', url: '/api/json/v1/data_models?filter[name]=[redacted]&page[limit]=[redacted]', remoteAddress: '127.0.0.1' } },
      'incoming request',
    );
    log.info({ res: { statusCode: 200 }, responseTime: 1.234 }, 'request completed');
  },
  'request lines with a secret in the URL': (log) => {
    log.info({ req: { method: 'GET', url: `/api/json/v1/data_models/${secret}`, remoteAddress: '127.0.0.1' } }, 'incoming request');
    log.info({ res: { statusCode: 404 }, responseTime: 1.234, code: 'not_found' }, 'request completed');
  },
};

const loggers: Record<string, () => Logger> = {
  'before: epoch times, no redaction': () => pino({ level: 'info', redact: LOG_REDACT }, sink),
  'ISO times, no redaction': () => pino({ level: 'info', redact: LOG_REDACT, timestamp: pino.stdTimeFunctions.isoTime }, sink),
  'json (now)': () => createLogger({ logLevel: 'info', logFormat: 'json' }, sink),
  'pretty (now)': () => createLogger({ logLevel: 'info', logFormat: 'pretty' }, sink),
};

function measure(make: () => Logger, scenario: Scenario): number {
  const log = make().child({ reqId: '01a20a7b-a406-71e7-ab46-09b701094693' });
  for (let i = 0; i < 20_000; i++) scenario(log);
  // CPU time of this thread, not wall time: the figure moves far less on a busy machine.
  const start = process.threadCpuUsage();
  for (let i = 0; i < LINES / 2; i++) scenario(log);
  const used = process.threadCpuUsage(start);
  return ((used.user + used.system) * 1000) / LINES;
}

console.log(
  `Log line cost, ${new Date().toISOString()}, Node ${process.version}, ${os.cpus().length} x ${os.cpus()[0]?.model ?? '?'}, ${LINES} lines per cell (thread CPU per line, best of 3)\n`,
);
console.log(`| Scenario | ${Object.keys(loggers).join(' | ')} |`);
console.log(
  `|---|${Object.keys(loggers)
    .map(() => '---:')
    .join('|')}|`,
);
for (const [name, scenario] of Object.entries(scenarios)) {
  const cells = Object.values(loggers).map((make) => Math.min(measure(make, scenario), measure(make, scenario), measure(make, scenario)));
  console.log(`| ${name} | ${cells.map((ns) => `${(ns / 1000).toFixed(2)} µs`).join(' | ')} |`);
}
console.log(`\n(${(bytes / 1e6).toFixed(0)} MB written to the sink)`);
