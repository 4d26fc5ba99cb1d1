/**
 * Properties of the one ISO 8601 parser (src/datetime.ts), which reads fact data, GraphQL
 * DateTime values and JSON:API filters: any instant written with any offset reads back as
 * that instant (milliseconds kept, finer digits dropped); impossible calendar dates and
 * out-of-range fields read as nothing; no input throws or yields an instant out of range.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { MAX_MS, MIN_MS, parseDateTime } from '../../src/datetime.ts';
import { runs } from '../helpers/property.ts';

const pad = (n: number, w = 2) => String(n).padStart(w, '0');

/** `ms` as local time at `offset` minutes east of UTC, in ISO 8601 with that offset. */
function withOffset(ms: number, offset: number, sep: string, fraction: string): string {
  const d = new Date(ms + offset * 60_000);
  const sign = offset < 0 ? '-' : '+';
  const a = Math.abs(offset);
  const zone = offset === 0 && sep === 'Z' ? 'Z' : `${sign}${pad(Math.floor(a / 60))}${sep === 'Z' ? ':' : sep}${pad(a % 60)}`;
  return `${pad(d.getUTCFullYear(), 4)}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())}T${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}${fraction}${zone}`;
}

test('any instant, written with any offset, reads back as that instant', () => {
  fc.assert(
    fc.property(
      fc.integer({ min: MIN_MS + 86_400_000, max: MAX_MS - 86_400_000 }),
      fc.integer({ min: -(23 * 60 + 59), max: 23 * 60 + 59 }),
      fc.constantFrom(':', '', 'Z'),
      fc.integer({ min: 0, max: 999_999 }),
      (ms, offset, sep, extra) => {
        // Milliseconds as written, then up to six more digits that are dropped.
        const millis = pad(((ms % 1000) + 1000) % 1000, 3);
        const fraction = `.${millis}${extra === 0 ? '' : String(extra).padStart(6, '0')}`;
        const text = withOffset(ms, offset, sep, fraction);
        assert.equal(parseDateTime(text)?.getTime(), ms, text);
        // Without a fraction: the whole second.
        assert.equal(parseDateTime(withOffset(ms, offset, sep, ''))?.getTime(), ms - (((ms % 1000) + 1000) % 1000), text);
      },
    ),
    { numRuns: runs(2000) },
  );
});

test('a day past the end of its month, or a field out of range, is no instant', () => {
  fc.assert(
    fc.property(fc.integer({ min: 1, max: 9999 }), fc.integer({ min: 1, max: 12 }), fc.integer({ min: 0, max: 3 }), (year, month, past) => {
      const d = new Date(0);
      d.setUTCFullYear(year, month, 0); // day 0 of the next month: the last day of this one
      const last = d.getUTCDate();
      const date = `${pad(year, 4)}-${pad(month)}`;
      assert.ok(parseDateTime(`${date}-${pad(last)}T00:00:00Z`), `${date}-${last}`);
      if (last + 1 + past <= 99) assert.equal(parseDateTime(`${date}-${pad(last + 1 + past)}T00:00:00Z`), undefined);
    }),
    { numRuns: runs(1000) },
  );
  for (const bad of [
    '2026-13-01T00:00:00Z',
    '2026-00-10T00:00:00Z',
    '2026-01-00T00:00:00Z',
    '2026-01-01T24:00:00Z',
    '2026-01-01T00:60:00Z',
    '2026-01-01T00:00:60Z',
    '2026-01-01T00:00:00+24:00',
    '2026-01-01T00:00:00+00:60',
    '0000-01-01T00:00:00Z',
  ]) {
    assert.equal(parseDateTime(bad), undefined, bad);
  }
});

test('no text throws, and whatever reads as an instant is a whole millisecond within years 1-9999', () => {
  const isoish = fc.stringMatching(/^[0-9]{4}-[0-9]{2}-[0-9]{2}([Tt ][0-9]{2}:[0-9]{2}(:[0-9]{2}([.,][0-9]{1,9})?)?([Zz]|[+\- ][0-9]{2}:?[0-9]{2})?)?$/);
  fc.assert(
    fc.property(fc.oneof(isoish, fc.string({ maxLength: 40 })), fc.boolean(), fc.boolean(), (text, dateOnly, spaceAsPlus) => {
      const d = parseDateTime(text, { dateOnly, spaceAsPlus });
      if (d === undefined) return;
      const ms = d.getTime();
      assert.ok(Number.isInteger(ms) && ms >= MIN_MS && ms <= MAX_MS, text);
      // A zone is required unless a bare date is allowed; a space stands for '+' only when asked.
      assert.ok(/[Zz]$|[+\- ]\d{2}:?\d{2}$/.test(text) || (dateOnly && /^\d{4}-\d{2}-\d{2}$/.test(text)), text);
      if (/\d [0-9]{2}:?[0-9]{2}$/.test(text)) assert.ok(spaceAsPlus, text);
    }),
    { numRuns: runs(3000) },
  );
});
