/**
 * Run records and answers have bounds: a step output over its cap is stored as a preview
 * that says so, and the later steps see that preview too (a run holds at most the cap per
 * step, in a test run as in a run), the steps together stay under theirs,
 * a large payload is shown as a preview, and a page of runs stays within a size known in
 * advance, whatever was stored before the caps.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { sql } from 'kysely';
import { API, deliver, saveOk, startFlow, waitForRun, type Flow } from '../webhooks/helpers.ts';
import { adminCall } from '../helpers/app.ts';
import { ANSWER_CAPS, capSteps, cutText, PAYLOAD_SHOWN_BYTES, PREVIEW_BYTES, RUN_ANSWER_MAX_BYTES } from '../../src/runs/run-record.ts';
import type { StepRecord } from '../../src/db/tables.ts';

const f: Flow = await startFlow();
const config = f.t.deps.config.runRecord;

// 20 transforms of 200,000 characters each, then one that measures the first and last.
const BIG = 20;
const bigSteps = Array.from({ length: BIG }, (_, i) => ({
  key: `big_${i}`,
  type: 'transform',
  config: { expression: '$pad("", 100000, "a") & $pad("", 100000, "b")' },
}));
const { tokens, workflow } = await saveOk(f, {
  step_params: [
    ...bigSteps,
    { key: 'measure', type: 'transform', config: { expression: `$length(steps.big_0) + $length(steps.big_${BIG - 1}) + $length(payload.blob)` } },
  ],
});

async function runWith(payload: unknown) {
  const d = await deliver(f, `/api/v1/webhooks/${tokens.hook}`, JSON.stringify(payload));
  assert.equal(d.status, 202, d.text);
  return waitForRun(f, d.body.workflow_run_id, 60_000);
}

const storedRow = async (id: string) =>
  (await sql<{ steps: StepRecord[]; payload: any }>`select steps, payload from workflow_runs where id = ${id}`.execute(f.t.deps.db)).rows[0]!;
const bytes = (v: unknown) => Buffer.byteLength(JSON.stringify(v));

const runs = [await runWith({ blob: '' }), await runWith({ blob: 'p'.repeat(100_000) }), await runWith({ blob: 'q' })];

describe('a run of large outputs', () => {
  it('is stored within the caps, each cut step saying so, and the later steps saw each cut output as its preview', async () => {
    const run = runs[0]!;
    assert.equal(run.attributes.status, 'succeeded', run.attributes.error);
    const stored = await storedRow(run.id);
    assert.ok(bytes(stored.steps) <= config.stepsBytes, `stored steps take ${bytes(stored.steps)} bytes`);
    for (const s of stored.steps.slice(0, BIG)) {
      assert.equal(s.status, 'succeeded');
      assert.equal(s.output_truncated, true, s.key);
      assert.equal(s.output_bytes, 200_002);
      assert.equal(typeof s.output, 'string');
      assert.ok(bytes(s.output) <= PREVIEW_BYTES);
      assert.ok((s.output as string).startsWith('"aaaa'));
    }
    const measure = stored.steps[BIG]!;
    // The preview, not the 200,000 characters: what the record keeps is what the run held.
    const previewLength = (stored.steps[0]!.output as string).length + (stored.steps[BIG - 1]!.output as string).length;
    assert.ok(previewLength < 2 * PREVIEW_BYTES);
    assert.equal(measure.output, previewLength);
    assert.equal(measure.output_truncated, undefined);
    // The answer shows the record as stored.
    assert.deepEqual(run.attributes.steps, stored.steps);
  });

  it('a payload over the shown size is a preview in answers, stored whole and used whole', async () => {
    const run = runs[1]!;
    assert.equal(run.attributes.steps[BIG].output, 100_000 + (run.attributes.steps[0].output as string).length * 2);
    assert.equal(run.attributes.payload_truncated, true);
    assert.equal(run.attributes.payload_bytes, bytes({ blob: 'p'.repeat(100_000) }));
    assert.ok(bytes(run.attributes.payload) <= PREVIEW_BYTES);
    assert.equal((await storedRow(run.id)).payload.blob.length, 100_000);
    const small = runs[2]!;
    assert.deepEqual(small.attributes.payload, { blob: 'q' });
    assert.equal(small.attributes.payload_truncated, false);
    assert.equal(small.attributes.payload_bytes, 12);
  });

  it('a test run holds the same: its later steps saw the preview of each cut output', async () => {
    const r = await f.api.post(`${API}/workflows/${workflow.id}/test_run`, { data: { type: 'workflow_test_run', attributes: { payload: { blob: 'r' } } } });
    assert.equal(r.status, 200, r.text.slice(0, 500));
    const steps = r.body.data.attributes.steps;
    assert.equal(steps[0].output_truncated, true);
    assert.equal(steps[0].output_bytes, 200_002);
    assert.equal(steps[BIG].output, 1 + (steps[0].output as string).length + (steps[BIG - 1].output as string).length);
    // Each step's input shows the earlier outputs as the step saw them: previews.
    assert.equal(steps[BIG].input.steps.big_0, steps[0].output);
  });

  it('a default page and the largest page answer 200 within the documented size', async () => {
    for (const query of ['', '?page[limit]=250']) {
      const r = await f.api.get(`${API}/workflow_runs${query}`);
      assert.equal(r.status, 200, r.text.slice(0, 500));
      assert.equal(r.body.data.length, runs.length);
      assert.ok(Buffer.byteLength(r.text) <= r.body.data.length * RUN_ANSWER_MAX_BYTES, `${r.text.length} bytes for ${r.body.data.length} runs`);
    }
  });
});

describe('records stored before the caps', () => {
  it('are cut in answers: by id, in a page and in the admin list', async () => {
    const id = runs[2]!.id;
    const huge: StepRecord[] = Array.from({ length: 50 }, (_, i) => ({
      key: `s${i}`,
      status: 'succeeded',
      started_at: null,
      finished_at: null,
      output: { text: 'z'.repeat(100_000) },
      error: i === 49 ? 'e'.repeat(100_000) : null,
    }));
    await sql`update workflow_runs set steps = ${JSON.stringify(huge)}::jsonb, error = ${'E'.repeat(100_000)} where id = ${id}`.execute(f.t.deps.db);
    const one = await f.api.get(`${API}/workflow_runs/${id}`);
    assert.equal(one.status, 200);
    assert.ok(Buffer.byteLength(one.text) <= RUN_ANSWER_MAX_BYTES, `${one.text.length} bytes`);
    const steps = one.body.data.attributes.steps as StepRecord[];
    const cut = steps.filter((s) => s.output_truncated === true);
    // Two of the 100 KB outputs still fit the answer's 256 KiB for steps.
    assert.equal(cut.length, 48);
    assert.ok(cut.every((s) => s.output_bytes === bytes({ text: 'z'.repeat(100_000) })));
    assert.match(steps[49]!.error!, /^e+ \.\.\. \[cut: 100000 bytes\]$/);
    assert.ok(bytes(one.body.data.attributes.error) <= ANSWER_CAPS.errorBytes);
    const page = await f.api.get(`${API}/workflow_runs`);
    assert.equal(page.status, 200);
    assert.ok(Buffer.byteLength(page.text) <= page.body.data.length * RUN_ANSWER_MAX_BYTES);
    const admin = await adminCall(f.t, 'GET', '/runs?limit=1000');
    assert.equal(admin.status, 200);
    assert.ok(Buffer.byteLength(admin.text) <= admin.body.data.length * RUN_ANSWER_MAX_BYTES, `${admin.text.length} bytes`);
    assert.equal(admin.body.data.find((r: any) => r.id === runs[1]!.id).payload_truncated, true);
  });
});

describe('the stored payload', () => {
  it('stays within the webhook body limit once its numbers are written out', async () => {
    // 1e20 is 4 characters in the body and 21 digits as stored.
    const body = `[${Array.from({ length: 200_000 }, () => '1e20').join(',')}]`;
    assert.ok(body.length <= f.t.deps.config.webhookMaxBodyBytes);
    const d = await deliver(f, `/api/v1/webhooks/${tokens.hook}`, body);
    assert.equal(d.status, 413, d.text);
    assert.equal(d.body.error, 'Request body too large');
    assert.match(d.body.detail, /as stored JSON/);
  });
});

describe('cutting', () => {
  it('never splits a surrogate pair', () => {
    const cut = cutText('😀'.repeat(1000), 101);
    assert.ok(bytes(cut) <= 101);
    assert.doesNotMatch(cut, /[\ud800-\udbff]$/);
  });

  it('fifty steps at their output cap fit the steps cap, the smaller outputs kept whole', () => {
    const steps: StepRecord[] = Array.from({ length: 50 }, (_, i) => ({
      key: `s${i}`.padEnd(63, 'x'),
      status: 'succeeded',
      started_at: new Date().toISOString(),
      finished_at: new Date().toISOString(),
      output: i === 7 ? 1 : 'w'.repeat(60_000 + i),
      error: null,
    }));
    const caps = { outputBytes: 65_536, errorBytes: 4096, stepsBytes: 131_072 };
    const out = capSteps(steps, caps);
    assert.ok(bytes(out) <= caps.stepsBytes, `${bytes(out)}`);
    assert.equal(out[7]!.output, 1);
    assert.ok(out.filter((s) => s.output_truncated).length >= 47);
    assert.ok(PAYLOAD_SHOWN_BYTES + ANSWER_CAPS.stepsBytes + ANSWER_CAPS.errorBytes < RUN_ANSWER_MAX_BYTES);
  });
});
