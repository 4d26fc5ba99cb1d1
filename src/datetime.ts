/**
 * The one ISO 8601 date-time parser of the service (fact data, GraphQL DateTime, JSON:API
 * filters). A time must carry a zone: without one its instant would depend on the server.
 * Milliseconds are kept and finer digits dropped, as every column is timestamptz(3); years
 * stay within 1-9999 (PostgreSQL has no year 0; JS prints later years in extended form).
 */

export const MIN_MS = Date.parse('0001-01-01T00:00:00.000Z');
export const MAX_MS = Date.parse('9999-12-31T23:59:59.999Z');

const RE = /^(\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?(?:([Zz])|([+\- ])(\d{2}):?(\d{2})))?$/;

export interface DateTimeOptions {
  /** Accept a bare date (midnight UTC), as a filter value may be. */
  dateOnly?: boolean;
  /** Accept a space as the '+' of an offset: an unencoded '+' in a query string arrives as one. */
  spaceAsPlus?: boolean;
}

export function parseDateTime(text: string, opts: DateTimeOptions = {}): Date | undefined {
  const m = RE.exec(text);
  if (!m) return undefined;
  if (m[4] === undefined && !opts.dateOnly) return undefined;
  if (m[9] === ' ' && !opts.spaceAsPlus) return undefined;
  const [year, month, day] = [m[1], m[2], m[3]].map(Number) as [number, number, number];
  const hour = Number(m[4] ?? 0);
  const minute = Number(m[5] ?? 0);
  const second = Number(m[6] ?? 0);
  const millis = m[7] === undefined ? 0 : Number(m[7].slice(0, 3).padEnd(3, '0'));
  if (month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || second > 59) return undefined;
  let offsetMinutes = 0;
  if (m[9] !== undefined) {
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

/** Node's timers take at most this many milliseconds (about 24.8 days); a longer wait is done in steps. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** How long to sleep before looking again: until `due`, in steps a timer can take. */
export function timerDelay(due: Date, now: Date): number {
  return Math.max(0, Math.min(MAX_TIMER_MS, due.getTime() - now.getTime()));
}
