/**
 * The logger: pino JSON lines with ISO times, or one readable line per entry on a terminal,
 * and no secret in either. Redaction works on the finished line, so it reaches every part of
 * it, whoever logged it: messages, child bindings (reqId), serialized errors, URLs.
 */
import pino, { type DestinationStream, type Logger } from 'pino';
import type { Config } from './config.ts';
import { SECRET_PREFIX } from './secrets.ts';

export const REDACTED = '[redacted]';

/** Members that hold a secret by name, whatever their value looks like. */
export const LOG_REDACT = {
  paths: [
    'req.headers.authorization',
    'req.headers["idempotency-key"]',
    'req.headers.cookie',
    'req.headers["x-api-key"]',
    'headers.authorization',
    'client_secret',
    'access_token',
    '*.client_secret',
    '*.access_token',
    '*.password',
  ],
  censor: REDACTED,
};

const escapeRe = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const PREFIXES = `(?:${Object.values(SECRET_PREFIX).map(escapeRe).join('|')})`;

// After the prefix: every character our secrets are made of (base64url, and the dot of an
// access token), and '%' for one that arrives percent-encoded. Quotes and backslashes end it,
// so redacting a JSON line leaves valid JSON, and "tbat_[redacted]" is not matched again.
const SECRET_SOURCE = `(${PREFIXES})[A-Za-z0-9_.%-]+`;
const SECRET_RE = new RegExp(SECRET_SOURCE, 'g');
const HAS_SECRET_RE = new RegExp(SECRET_SOURCE);
// A random secret of ours without its prefix, or one of another system: a long run of
// base64url characters that mixes upper case, lower case and digits (UUIDs and hex ids do not).
const RANDOM_RUN_RE = /[A-Za-z0-9_-]{32,}/g;

// Most lines hold no secret; a substring search for the prefixes' first two letters is
// several times cheaper than running the regular expression over them.
const STEMS = [...new Set(Object.values(SECRET_PREFIX).map((p) => p.slice(0, 2)))];

/** Replaces everything after the prefix of each secret-shaped substring: "tbat_[redacted]". */
export function redactSecrets(text: string): string {
  return STEMS.some((stem) => text.includes(stem)) ? text.replace(SECRET_RE, `$1${REDACTED}`) : text;
}

/** Whether a value carries one of our secrets, or something that looks like a random secret. */
export function looksLikeSecret(text: string): boolean {
  if (HAS_SECRET_RE.test(text)) return true;
  for (const run of text.match(RANDOM_RUN_RE) ?? []) {
    if (/[A-Z]/.test(run) && /[a-z]/.test(run) && /\d/.test(run)) return true;
  }
  return false;
}

const LEVELS: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };
const LEVEL_COLORS: Record<number, string> = { 10: '90', 20: '36', 30: '32', 40: '33', 50: '31', 60: '35' };

function flatten(prefix: string, value: unknown, out: string[]): void {
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
    for (const [k, v] of Object.entries(value)) flatten(prefix ? `${prefix}.${k}` : k, v, out);
  } else if (typeof value === 'number' && !Number.isInteger(value)) {
    out.push(`${prefix}=${Number(value.toFixed(3))}`);
  } else if (value !== undefined) {
    out.push(`${prefix}=${typeof value === 'string' && /^[^\s"]+$/.test(value) ? value : JSON.stringify(value)}`);
  }
}

/** One JSON line as "time LEVEL message key=value ...", an error's stack indented below it. */
export function prettyLine(json: string, color = false): string {
  let entry: Record<string, unknown>;
  try {
    entry = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return json;
  }
  const { level, time, msg, pid: _pid, hostname: _hostname, err, ...rest } = entry;
  const levelNumber = typeof level === 'number' ? level : 30;
  const name = (LEVELS[levelNumber] ?? String(level)).padEnd(5);
  const fields: string[] = [];
  flatten('', rest, fields);
  let line = `${String(time)} ${color ? `\u001b[${LEVEL_COLORS[levelNumber] ?? '0'}m${name}\u001b[0m` : name} ${typeof msg === 'string' ? msg : ''}`;
  if (fields.length > 0) line += ` ${fields.join(' ')}`;
  if (err !== undefined) {
    const stack = typeof err === 'object' && err !== null && typeof (err as { stack?: unknown }).stack === 'string' ? (err as { stack: string }).stack : JSON.stringify(err);
    line += `\n    ${stack.split('\n').join('\n    ')}`;
  }
  return `${line}\n`;
}

/**
 * The process logger. `destination` defaults to stdout; tests pass a stream to read the lines.
 * Every child logger inherits the redaction, since it is a hook of the root.
 */
export function createLogger(config: Pick<Config, 'logLevel' | 'logFormat'>, destination?: DestinationStream): Logger {
  const color = config.logFormat === 'pretty' && destination === undefined && process.stdout.isTTY === true;
  const streamWrite = config.logFormat === 'pretty' ? (line: string) => prettyLine(redactSecrets(line), color) : redactSecrets;
  const options = { level: config.logLevel, redact: LOG_REDACT, timestamp: pino.stdTimeFunctions.isoTime, hooks: { streamWrite } };
  return destination === undefined ? pino(options) : pino(options, destination);
}
