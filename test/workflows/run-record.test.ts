/**
 * The size caps of a run record (src/runs/run-record.ts), without a worker: cutText
 * keeps a start of the text that fits, never half of a surrogate pair (a property over any
 * text), and capSteps, capRecord and presentRun cut what is over its cap and keep the rest.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type { StepRecord } from '../../src/db/tables.ts';
import { capRecord, capSteps, cutText, jsonBytes, PAYLOAD_SHOWN_BYTES, presentRun, PREVIEW_BYTES, type RecordCaps } from '../../src/runs/run-record.ts';
import { runs } from '../helpers/property.ts';

// Characters of one, two, three and four UTF-8 bytes, and ones JSON escapes (to six bytes).
const UNIT = fc.oneof(
  fc.constantFrom('a', 'é', '€', '😀', '𝄞', '"', '\\', '\n', '\u0001', '\u2028'),
  fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }),
);
const text = fc.string({ unit: UNIT, maxLength: 80 });
const MARKER = fc.constantFrom('', ' ... [cut]', '…', '😀');

describe('cutText', () => {
  it('keeps a start of the text that fits, never ending inside a surrogate pair', () => {
    fc.assert(
      fc.property(text, fc.integer({ min: 0, max: 200 }), MARKER, (t, maxBytes, marker) => {
        const cut = cutText(t, maxBytes, marker);
        if (jsonBytes(t) <= maxBytes) {
          assert.equal(cut, t);
          return;
        }
        assert.ok(cut.endsWith(marker));
        const head = cut.slice(0, cut.length - marker.length);
        assert.ok(t.startsWith(head));
        assert.ok(head.isWellFormed(), `ends inside a pair: ${JSON.stringify(head)}`);
        if (jsonBytes(marker) > maxBytes) return;
        assert.ok(jsonBytes(cut) <= maxBytes, `${jsonBytes(cut)} > ${maxBytes}`);
        // Close to the longest start that fits: a prefix ending in half a pair is two bytes
        // longer as JSON than the whole pair, so the search may stop up to two characters short.
        const points = [...t];
        const kept = [...head].length;
        assert.ok(
          kept === points.length || jsonBytes(points.slice(0, kept + 3).join('') + marker) > maxBytes,
          `${kept} of ${points.length} kept in ${maxBytes}`,
        );
      }),
      { numRuns: runs(1000) },
    );
  });

  it('a text of astral characters is cut between them', () => {
    fc.assert(
      fc.property(fc.string({ unit: fc.constantFrom('😀', '𝄞', '🂡'), minLength: 1, maxLength: 200 }), fc.integer({ min: 2, max: 900 }), (t, maxBytes) => {
        const cut = cutText(t, maxBytes);
        assert.ok(cut.isWellFormed());
        assert.equal(cut.length % 2, 0);
        assert.ok(jsonBytes(cut) <= maxBytes);
      }),
      { numRuns: runs(500) },
    );
  });
});

const step = (key: string, output: unknown, error: string | null = null): StepRecord => ({
  key,
  status: error === null ? 'succeeded' : 'failed',
  started_at: null,
  finished_at: null,
  output,
  error,
});
const caps: RecordCaps = { outputBytes: 4096, errorBytes: 1024, stepsBytes: 8192 };

describe('capSteps', () => {
  it('keeps a record within its caps as it is', () => {
    const steps = [step('a', { n: 1 }), step('b', 'x'.repeat(1000), 'e'.repeat(500))];
    assert.deepEqual(capSteps(steps, caps), steps);
  });

  it('keeps a preview of an output over its cap, saying how large it was', () => {
    const big = { items: 'y'.repeat(5000) };
    const [a, b] = capSteps([step('a', 1), step('b', big)], caps);
    assert.deepEqual(a, step('a', 1));
    assert.equal(b!.output_truncated, true);
    assert.equal(b!.output_bytes, jsonBytes(big));
    assert.equal(typeof b!.output, 'string');
    assert.ok((JSON.stringify(big) as string).startsWith(b!.output as string));
    assert.ok(jsonBytes(b!.output) <= PREVIEW_BYTES);
  });

  it('cuts an error over its cap with a marker giving its size', () => {
    const error = 'é'.repeat(2000);
    const [s] = capSteps([step('a', null, error)], caps);
    assert.ok(jsonBytes(s!.error) <= caps.errorBytes);
    assert.match(s!.error!, /^é+ \.\.\. \[cut: 4000 bytes\]$/);
  });

  it('cuts the largest outputs first until the steps fit', () => {
    const steps = [
      step('a', 'a'.repeat(3000)),
      step('b', 'b'.repeat(3900)),
      step('c', 'c'.repeat(100)),
      step('d', 'd'.repeat(3500)),
      step('e', 'e'.repeat(2000)),
    ];
    const out = capSteps(steps, caps);
    assert.ok(jsonBytes(out) <= caps.stepsBytes);
    assert.deepEqual(
      out.map((s) => s.output_truncated ?? false),
      [false, true, false, true, false],
    );
    assert.deepEqual([out[0], out[2], out[4]], [steps[0], steps[2], steps[4]]);
  });
});

describe('capRecord', () => {
  it('makes errors storable: no NUL, no lone surrogate', () => {
    const r = capRecord({ steps: [step('a', null, 'bad\0\ud800!')], error: 'x\udc00\0y', other: 1 }, caps);
    assert.deepEqual(r, { steps: [step('a', null, 'bad\ufffd\ufffd!')], error: 'x\ufffd\ufffdy', other: 1 });
    assert.equal(capRecord({ steps: [], error: null }, caps).error, null);
  });

  it('cuts a long run error', () => {
    const r = capRecord({ steps: [], error: 'z'.repeat(5000) }, caps);
    assert.ok(jsonBytes(r.error) <= caps.errorBytes);
    assert.match(r.error!, /^z+ \.\.\. \[cut: 5000 bytes\]$/);
  });
});

describe('presentRun', () => {
  it('shows a payload up to its limit whole, a larger one as a preview', () => {
    const small = { a: 'b'.repeat(PAYLOAD_SHOWN_BYTES - 100) };
    assert.deepEqual(presentRun({ payload: small, steps: [], error: null }), {
      steps: [],
      error: null,
      payload: small,
      payload_truncated: false,
      payload_bytes: jsonBytes(small),
      trace_id: null,
    });
    const traced = presentRun({ payload: small, steps: [], traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' });
    assert.equal(traced.trace_id, '4bf92f3577b34da6a3ce929d0e0e4736', 'the trace id is read off the kept traceparent');
    const large = { a: 'b'.repeat(PAYLOAD_SHOWN_BYTES) };
    const shown = presentRun({ payload: large, steps: null });
    assert.equal(shown.payload_truncated, true);
    assert.equal(shown.payload_bytes, jsonBytes(large));
    assert.ok(jsonBytes(shown.payload) <= PREVIEW_BYTES);
    assert.deepEqual(shown.steps, []);
    assert.equal(shown.error, null);
  });
});

describe('capSteps on nested records', () => {
  const caps: RecordCaps = { outputBytes: 2048, errorBytes: 256, stepsBytes: 32_768 };
  const big = (key: string, n = 2000): StepRecord => ({
    key,
    status: 'succeeded',
    started_at: null,
    finished_at: null,
    output: 'x'.repeat(n),
    error: null,
  });

  it("cuts outputs inside a switch's branch and a for_each's items until the steps fit", () => {
    const sw: StepRecord = { ...big('route', 10), branch: 0, steps: Array.from({ length: 20 }, (_, i) => big(`b${i}`)) };
    const loop: StepRecord = {
      ...big('loop', 10),
      items: { count: 10, succeeded: 10, stopped: 0, failed: 0, not_run: 0 },
      item_records: Array.from({ length: 10 }, (_, index) => ({
        index,
        status: 'succeeded' as const,
        steps: [big('each'), { ...big('err'), error: 'e'.repeat(1000) }],
      })),
    };
    const input = [sw, loop];
    const before = JSON.stringify(input);
    const out = capSteps(input, caps);
    assert.ok(jsonBytes(out) <= caps.stepsBytes, `${jsonBytes(out)} bytes`);
    assert.equal(JSON.stringify(input), before, 'the input is not changed');
    const cut = out[0]!.steps!.filter((s) => s.output_truncated);
    assert.ok(cut.length > 0);
    assert.equal(cut[0]!.output_bytes, 2002);
    assert.ok(out[1]!.item_records!.every((it) => jsonBytes(it.steps[1]!.error) <= caps.errorBytes));
    assert.equal(out[0]!.records_cut, undefined, 'previews were enough');
  });

  it('drops nested records, the largest holder first, when their previews do not fit', () => {
    const holder = (key: string, n: number): StepRecord => ({
      ...big(key, 10),
      branch: 0,
      steps: Array.from({ length: n }, (_, i) => big(`${key}_${i}`, 4000)),
    });
    const out = capSteps([holder('small', 2), holder('huge', 100)], caps);
    assert.ok(jsonBytes(out) <= caps.stepsBytes, `${jsonBytes(out)} bytes`);
    assert.equal(out[1]!.records_cut, true);
    assert.deepEqual(out[1]!.steps, []);
    assert.equal(out[0]!.records_cut, undefined);
    assert.equal(out[0]!.steps!.length, 2);
  });
});
