/**
 * The pool's timestamptz parser (src/db/timestamptz.ts) gives what pg's own parser
 * (postgres-date) gives, for the server's canonical text (any instant, 0-6 fraction
 * digits, offsets in hours, minutes and seconds) and for what it leaves to pg's parser
 * (BC dates, infinity, years before 100 or past 9999, malformed text). On PostgreSQL
 * (DATABASE_URL set) the texts the server itself prints, under several TimeZones, are
 * read through the pool and compared too.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { sql } from 'kysely';
import { createDb } from '../../src/db/connect.ts';
import { parseTimestamptz, pgTimestamptz } from '../../src/db/timestamptz.ts';
import { runs } from '../helpers/property.ts';

const pad = (n: number, w = 2) => String(n).padStart(w, '0');

/** Same result: both invalid, both the same number, or both the same instant. */
function same(text: string): void {
  const a = parseTimestamptz(text);
  const b = pgTimestamptz(text);
  if (a instanceof Date && b instanceof Date) assert.ok(Object.is(a.getTime(), b.getTime()), `${text}: ${a.getTime()} vs ${b.getTime()}`);
  else assert.ok(Object.is(a, b), `${text}: ${String(a)} vs ${String(b)}`);
}

// Two centuries before year 1 to the last millisecond of 9999: short years and BC included.
const MIN_MS = Date.parse('0001-01-01T00:00:00Z') - 200 * 365 * 86_400_000;
const MAX_MS = Date.parse('9999-12-31T23:59:59.999Z');

test('canonical texts: any instant, fraction and offset read as pg reads them', () => {
  fc.assert(
    fc.property(
      fc.integer({ min: MIN_MS, max: MAX_MS }),
      fc.integer({ min: 0, max: 6 }),
      fc.integer({ min: 0, max: 999_999 }),
      fc.integer({ min: -(15 * 3600 + 59 * 60 + 59), max: 15 * 3600 + 59 * 60 + 59 }),
      fc.constantFrom('h', 'hm', 'hms'),
      fc.constantFrom('', ' BC'),
      (ms, fracDigits, micros, offsetSeconds, zoneForm, era) => {
        const d = new Date(ms);
        const fraction = fracDigits === 0 ? '' : `.${pad(micros, 6).slice(0, fracDigits)}`;
        const a = Math.abs(offsetSeconds);
        const sign = offsetSeconds < 0 ? '-' : '+';
        const zone =
          zoneForm === 'h'
            ? `${sign}${pad(Math.floor(a / 3600))}`
            : zoneForm === 'hm'
              ? `${sign}${pad(Math.floor(a / 3600))}:${pad(Math.floor(a / 60) % 60)}`
              : `${sign}${pad(Math.floor(a / 3600))}:${pad(Math.floor(a / 60) % 60)}:${pad(a % 60)}`;
        const year = Math.abs(d.getUTCFullYear());
        const text = `${pad(year, 4)}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())} ${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}${fraction}${zone}${era}`;
        same(text);
      },
    ),
    { numRuns: runs(20_000) },
  );
});

test('fixed cases: microseconds, offsets, BC, infinity, short years, malformed', () => {
  const cases = [
    '2026-11-27 14:23:58.123456+00',
    '2026-11-27 14:23:58+00',
    '2026-11-27 14:23:58.1+00',
    '2026-11-27 14:23:58.999999-03:30',
    '1883-11-18 11:59:59.5-07:52:58',
    '2026-11-27 14:23:58.123456+05:45',
    '2026-11-27 14:23:58.1234567+00',
    '2026-11-27 14:23:58.+00',
    '0001-01-01 00:00:00+00 BC',
    '4714-11-24 00:00:00+00 BC',
    '0099-12-31 23:59:59.999+00',
    '0100-01-01 00:00:00+00',
    '12345-01-01 00:00:00+00',
    '294276-12-31 23:59:59.999999+00',
    'infinity',
    '-infinity',
    '2026-11-27',
    '2026-11-27T14:23:58Z',
    '2026-11-27 14:23:58Z',
    '2026-11-27 14:23:58 +00',
    '2026-11-27 14:23:58+0',
    '2026-11-27 14:23:58+005',
    '2026-11-27 14:23:58+00:3',
    '2026-11-27 14:23:58+00-30',
    '2026-13-45 25:61:61+00',
    '2026-1a-27 14:23:58+00',
    '',
    'garbage',
  ];
  for (const text of cases) same(text);
  // Not only equal: right.
  assert.equal((parseTimestamptz('2026-11-27 14:23:58.123456+05:45') as Date).toISOString(), '2026-11-27T08:38:58.123Z');
});

test('any text reads as pg reads it', () => {
  const chars = fc.constantFrom(...'0123456789-: .+BCZTinfty'.split(''));
  fc.assert(
    fc.property(fc.array(chars, { maxLength: 40 }), (cs) => same(cs.join(''))),
    { numRuns: runs(20_000) },
  );
  // Near-canonical texts: one character of a canonical one replaced.
  const base = '2026-11-27 14:23:58.123456+05:30';
  fc.assert(
    fc.property(fc.integer({ min: 0, max: base.length - 1 }), chars, (at, c) => same(base.slice(0, at) + c + base.slice(at + 1))),
    { numRuns: runs(5_000) },
  );
});

test('PostgreSQL: the texts the server prints read through the pool as pg reads them', { skip: !process.env.DATABASE_URL }, async () => {
  const { db } = createDb({ databaseUrl: process.env.DATABASE_URL, poolSize: 1 });
  try {
    for (const zone of ['UTC', 'Asia/Kathmandu', 'America/St_Johns', 'America/Denver']) {
      await sql`set time zone ${sql.lit(zone)}`.execute(db);
      const { rows } = await sql<{ t: Date | number; text: string }>`
        select t, t::text as text from (values
          (timestamptz '2026-11-27 14:23:58.123456+00'), (timestamptz '1850-01-01 00:00:00.5+00'),
          (timestamptz '0050-06-01 12:00:00+00'), (timestamptz '0001-01-01 00:00:00+00 BC'),
          (timestamptz 'infinity'), (timestamptz '-infinity'), (now()), (clock_timestamp())
        ) v(t)`.execute(db);
      assert.equal(rows.length, 8);
      for (const r of rows) {
        const expected = pgTimestamptz(r.text);
        if (expected instanceof Date) assert.equal((r.t as Date).getTime(), expected.getTime(), `${zone}: ${r.text}`);
        else assert.equal(r.t, expected, `${zone}: ${r.text}`);
      }
    }
  } finally {
    await db.destroy();
  }
});
