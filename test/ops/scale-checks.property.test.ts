/**
 * The arithmetic of the scale-out run's checks (scripts/scale-checks.ts). `unplaceable`
 * decides whether a limit per window was broken when each event's window is known only
 * within a range: it must agree with an exhaustive search on small cases, or the run's
 * PASS on the trigger windows and the connector budget would mean nothing.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { maxPerWindow, parseExposition, sumOf, unplaceable } from '../../scripts/scale-checks.ts';
import { runs } from '../helpers/property.ts';

/** The fewest events left out by any assignment of events to windows of their range, by trying them all. */
function fewestLeftOut(ranges: Array<[number, number]>, capacity: number): number {
  const used = new Map<number, number>();
  let best = ranges.length;
  const place = (i: number, left: number) => {
    if (left >= best) return;
    if (i === ranges.length) {
      best = left;
      return;
    }
    const [first, last] = ranges[i]!;
    for (let w = first; w <= last; w++) {
      if ((used.get(w) ?? 0) >= capacity) continue;
      used.set(w, (used.get(w) ?? 0) + 1);
      place(i + 1, left);
      used.set(w, used.get(w)! - 1);
    }
    place(i + 1, left + 1);
  };
  place(0, 0);
  return best;
}

describe('unplaceable', () => {
  it('counts the events no window of their range can take', () => {
    assert.equal(unplaceable([], 1), 0);
    assert.equal(unplaceable([[0, 0]], 1), 0);
    assert.equal(
      unplaceable(
        Array.from({ length: 3 }, () => [5, 5] as const),
        2,
      ),
      1,
    );
    assert.equal(
      unplaceable(
        Array.from({ length: 7 }, () => [5, 6] as const),
        3,
      ),
      1,
    );
    // A range that reaches the next window moves there, so the narrow ones fit: first fit would fail here.
    assert.equal(
      unplaceable(
        [
          [0, 1],
          [0, 0],
          [0, 0],
        ],
        2,
      ),
      0,
    );
    // Far apart windows are independent.
    assert.equal(
      unplaceable(
        [
          [1_000_000, 1_000_000],
          [0, 0],
          [1_000_000, 1_000_000],
        ],
        1,
      ),
      1,
    );
  });

  it('agrees with an exhaustive search', () => {
    const range = fc.tuple(fc.integer({ min: 0, max: 5 }), fc.integer({ min: 0, max: 2 })).map(([first, span]): [number, number] => [first, first + span]);
    fc.assert(
      fc.property(fc.array(range, { maxLength: 8 }), fc.integer({ min: 1, max: 3 }), (ranges, capacity) => {
        assert.equal(unplaceable(ranges, capacity), fewestLeftOut(ranges, capacity), JSON.stringify({ ranges, capacity }));
      }),
      { numRuns: runs(300) },
    );
  });
});

describe('maxPerWindow and the exposition', () => {
  it('counts per aligned window', () => {
    assert.equal(maxPerWindow([], 1000), 0);
    assert.equal(maxPerWindow([999, 1000, 1001, 1999, 2000], 1000), 3);
  });

  it('reads samples and sums them by label', () => {
    const samples = parseExposition(
      [
        '# HELP tributary_webhook_deliveries_total Webhook deliveries by outcome',
        'tributary_webhook_deliveries_total{outcome="accepted"} 7',
        'tributary_webhook_deliveries_total{outcome="duplicate"} 2',
        'tributary_step_attempts_total{type="write_fact",status="succeeded"} 5',
        'tributary_step_attempts_total{type="transform",status="succeeded"} 4',
        'tributary_facts_written_total 6',
        '',
      ].join('\n'),
    );
    assert.equal(sumOf(samples, 'tributary_webhook_deliveries_total'), 9);
    assert.equal(sumOf(samples, 'tributary_webhook_deliveries_total', { outcome: 'duplicate' }), 2);
    assert.equal(sumOf(samples, 'tributary_step_attempts_total', { status: 'succeeded' }), 9);
    assert.equal(sumOf(samples, 'tributary_facts_written_total'), 6);
    assert.throws(() => parseExposition('not a sample'), /not a sample line/);
  });
});
