/**
 * The text of a timestamptz as PostgreSQL sends it (DateStyle ISO, any TimeZone), read
 * into a Date without regular expressions. pg's own parser (postgres-date) runs three
 * regular expressions, a split and parseFloat per value, and a page of fact rows carries
 * two or three timestamps a row: about 6% of a JSON:API list's server CPU. The server's
 * form is fixed, `YYYY-MM-DD HH:MM:SS[.f{1,6}]±HH[:MM[:SS]]`; that form is read here and
 * anything else (BC dates, infinity, years before 100 or past 9999, other DateStyles) goes
 * to pg's own parser, so every input gives what pg's parser gives (a property test holds
 * the two equal).
 */
import pg from 'pg';

export const TIMESTAMPTZ_OID = 1184;

/** pg's parser for the type (postgres-date), as pg's default registry holds it. */
export const pgTimestamptz = pg.types.getTypeParser(TIMESTAMPTZ_OID, 'text') as (text: string) => Date | number | null;

const ZERO = 48;

/** Two or more digits at s[at..at+n) as a number, or -1 when one is not a digit. */
function digits(s: string, at: number, n: number): number {
  let v = 0;
  for (let i = at; i < at + n; i++) {
    const d = s.charCodeAt(i) - ZERO;
    if (d < 0 || d > 9) return -1;
    v = v * 10 + d;
  }
  return v;
}

/** The canonical form only; undefined sends the text to postgres-date. */
function fastParse(s: string): Date | undefined {
  const len = s.length;
  // 'YYYY-MM-DD HH:MM:SS' + sign + HH at the least.
  if (len < 22 || s.charCodeAt(4) !== 45 || s.charCodeAt(7) !== 45 || s.charCodeAt(10) !== 32 || s.charCodeAt(13) !== 58 || s.charCodeAt(16) !== 58)
    return undefined;
  const year = digits(s, 0, 4);
  const month = digits(s, 5, 2);
  const day = digits(s, 8, 2);
  const hour = digits(s, 11, 2);
  const minute = digits(s, 14, 2);
  const second = digits(s, 17, 2);
  // Years 0-99 are read by Date.UTC as 1900-1999: postgres-date corrects that; leave it to it.
  if (year < 100 || month < 0 || day < 0 || hour < 0 || minute < 0 || second < 0) return undefined;
  let i = 19;
  let ms = 0;
  if (s.charCodeAt(i) === 46) {
    // Up to six digits; the milliseconds are the first three (postgres-date's
    // 1000 * parseFloat('.f') truncated by Date.UTC gives the same for every 1-6 digits).
    let n = 0;
    i++;
    while (i < len) {
      const d = s.charCodeAt(i) - ZERO;
      if (d < 0 || d > 9) break;
      if (n < 3) ms = ms * 10 + d;
      n++;
      i++;
    }
    if (n === 0 || n > 6) return undefined;
    for (let k = n; k < 3; k++) ms *= 10;
  }
  const sign = s.charCodeAt(i);
  if (sign !== 43 && sign !== 45) return undefined;
  const rest = len - i - 1;
  if (rest !== 2 && rest !== 5 && rest !== 8) return undefined;
  const oh = digits(s, i + 1, 2);
  let offset = oh * 3600;
  if (oh < 0) return undefined;
  if (rest >= 5) {
    const om = digits(s, i + 4, 2);
    if (s.charCodeAt(i + 3) !== 58 || om < 0) return undefined;
    offset += om * 60;
  }
  if (rest === 8) {
    const os = digits(s, i + 7, 2);
    if (s.charCodeAt(i + 6) !== 58 || os < 0) return undefined;
    offset += os;
  }
  return new Date(Date.UTC(year, month - 1, day, hour, minute, second, ms) - (sign === 45 ? -offset : offset) * 1000);
}

/** pg's text parser for timestamptz (oid 1184): postgres-date's result, faster. */
export function parseTimestamptz(text: string): Date | number | null {
  return fastParse(text) ?? pgTimestamptz(text);
}
