/**
 * The logger: pino JSON lines with ISO times, or one readable line per entry on a terminal,
 * and no secret in either. Redaction works on the finished line, so it reaches every part of
 * it, whoever logged it: messages, child bindings (reqId), serialized errors, URLs.
 */
import pino, { type DestinationStream, type Logger } from 'pino';
import type { Config } from './config.ts';
import { OUR_SECRET_SOURCE, SECRET_PREFIX } from './secrets.ts';

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

const SECRET_RE = new RegExp(OUR_SECRET_SOURCE, 'g');

// Most lines hold no secret; a substring search for the prefixes' first two letters is
// several times cheaper than running the regular expression over them.
const STEMS = [...new Set(Object.values(SECRET_PREFIX).map((p) => p.slice(0, 2)))];

/** Replaces everything after the prefix of each secret-shaped substring: "tbat_[redacted]". */
export function redactSecrets(text: string): string {
  return STEMS.some((stem) => text.includes(stem)) ? text.replace(SECRET_RE, `$1${REDACTED}`) : text;
}

/**
 * The forms a configured secret of any shape takes in a log line: as given, escaped inside a
 * JSON string, percent-encoded (a path or query), form-encoded.
 */
function formsOf(secret: string): string[] {
  const forms = [secret, JSON.stringify(secret).slice(1, -1), encodeURIComponent(secret), new URLSearchParams({ s: secret }).toString().slice(2)];
  return [...new Set(forms)];
}

/** redactSecrets, and every form of the given secrets replaced whole ("[redacted]"). */
export function secretRedactor(secrets: ReadonlyArray<string | undefined>): (text: string) => string {
  const forms = secrets.filter((s): s is string => s !== undefined && s !== '').flatMap(formsOf);
  if (forms.length === 0) return redactSecrets;
  return (text) => {
    let out = redactSecrets(text);
    for (const form of forms) if (out.includes(form)) out = out.replaceAll(form, REDACTED);
    return out;
  };
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
    const stack =
      typeof err === 'object' && err !== null && typeof (err as { stack?: unknown }).stack === 'string'
        ? (err as { stack: string }).stack
        : JSON.stringify(err);
    line += `\n    ${stack.split('\n').join('\n    ')}`;
  }
  return `${line}\n`;
}

/**
 * The process logger. `destination` defaults to stdout; tests pass a stream to read the lines.
 * Every child logger inherits the redaction, since it is a hook of the root. The admin token
 * is redacted whatever it looks like: a configured one need not carry our prefix.
 */
export function createLogger(config: Pick<Config, 'logLevel' | 'logFormat'> & { adminToken?: string | undefined }, destination?: DestinationStream): Logger {
  const color = config.logFormat === 'pretty' && destination === undefined && process.stdout.isTTY === true;
  const redact = secretRedactor([config.adminToken]);
  const streamWrite = config.logFormat === 'pretty' ? (line: string) => prettyLine(redact(line), color) : redact;
  const options = { level: config.logLevel, redact: LOG_REDACT, timestamp: pino.stdTimeFunctions.isoTime, hooks: { streamWrite } };
  return destination === undefined ? pino(options) : pino(options, destination);
}
