/**
 * The two custom scalars of the schema. DateTime is an ISO 8601 instant that always leaves
 * as UTC with a trailing Z; Json leaves as JSON text so that a client never has to know the
 * shape of a data model to select `data`.
 */
import { GraphQLError, GraphQLScalarType, Kind, type ValueNode } from 'graphql';

// Date and time with a mandatory zone: a timestamp without one would silently depend on
// the server's time zone. Seconds and fractions are optional, as ISO 8601 allows.
// PostgreSQL has no year 0 and JS prints years past 9999 in an extended form: stay inside both.
export const MIN_MS = Date.parse('0001-01-01T00:00:00.000Z');
const MAX_MS = Date.parse('9999-12-31T23:59:59.999Z');

const DATE_TIME_RE = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(?:([Zz])|([+-])(\d{2}):?(\d{2}))$/;

/**
 * Parses an ISO 8601 date-time with a zone into a Date (milliseconds; finer digits are
 * dropped, as storage keeps milliseconds). Returns undefined for anything else, including
 * impossible calendar dates such as February 30th and instants outside the years 1-9999.
 */
export function parseDateTime(text: string): Date | undefined {
  const m = DATE_TIME_RE.exec(text);
  if (!m) return undefined;
  const [year, month, day, hour, minute] = [m[1], m[2], m[3], m[4], m[5]].map(Number) as [number, number, number, number, number];
  const second = m[6] === undefined ? 0 : Number(m[6]);
  const millis = m[7] === undefined ? 0 : Number(m[7].slice(0, 3).padEnd(3, '0'));
  if (month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || second > 59) return undefined;
  let offsetMinutes = 0;
  if (m[8] === undefined) {
    const oh = Number(m[10]);
    const om = Number(m[11]);
    if (oh > 23 || om > 59) return undefined;
    offsetMinutes = (m[9] === '-' ? -1 : 1) * (oh * 60 + om);
  }
  // setUTCFullYear, unlike Date.UTC, does not map years 0-99 onto 1900-1999.
  const d = new Date(0);
  d.setUTCFullYear(year, month - 1, day);
  if (d.getUTCMonth() !== month - 1 || d.getUTCDate() !== day) return undefined;
  d.setUTCHours(hour, minute, second, millis);
  const ms = d.getTime() - offsetMinutes * 60_000;
  return ms < MIN_MS || ms > MAX_MS ? undefined : new Date(ms);
}

function serializeDateTime(value: unknown): string {
  if (value instanceof Date && !Number.isNaN(value.getTime())) return value.toISOString();
  if (typeof value === 'string') {
    const d = parseDateTime(value);
    if (d) return d.toISOString();
  }
  throw new GraphQLError('DateTime cannot represent this value');
}

function parseDateTimeInput(value: unknown): Date {
  const d = typeof value === 'string' ? parseDateTime(value) : undefined;
  if (!d) throw new GraphQLError('DateTime must be an ISO 8601 date-time with a zone, e.g. 2026-07-05T12:00:00Z or 2026-07-05T14:00:00+02:00');
  return d;
}

export const DateTimeScalar = new GraphQLScalarType<Date, string>({
  name: 'DateTime',
  description: 'An ISO 8601 timestamp, always returned in UTC with a trailing Z. Input with an offset is converted to UTC.',
  serialize: serializeDateTime,
  parseValue: parseDateTimeInput,
  parseLiteral(ast: ValueNode) {
    if (ast.kind !== Kind.STRING) throw new GraphQLError('DateTime must be given as a string', { nodes: ast });
    return parseDateTimeInput(ast.value);
  },
});

export const JsonScalar = new GraphQLScalarType<unknown, string>({
  name: 'Json',
  description: 'Arbitrary JSON carried as UTF-8 text: the value is a string holding a JSON document.',
  serialize(value: unknown): string {
    const text = JSON.stringify(value);
    if (text === undefined) throw new GraphQLError('Json cannot represent this value');
    return text;
  },
  parseValue(value: unknown): unknown {
    if (typeof value !== 'string') throw new GraphQLError('Json input must be a string holding JSON text');
    try {
      return JSON.parse(value);
    } catch {
      throw new GraphQLError('Json input is not valid JSON text');
    }
  },
  parseLiteral(ast: ValueNode): unknown {
    if (ast.kind !== Kind.STRING) throw new GraphQLError('Json input must be a string holding JSON text', { nodes: ast });
    try {
      return JSON.parse(ast.value);
    } catch {
      throw new GraphQLError('Json input is not valid JSON text', { nodes: ast });
    }
  },
});
