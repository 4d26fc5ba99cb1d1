import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { seedTenant, startApp, type Tenant, type TestApp } from '../helpers/app.ts';
import { createModel, factCount } from './helpers.ts';
import { IMPORT_BATCH, importFacts, MIN_BATCH_LINES, resolveImportTarget, type ImportBatching } from '../../src/facts/import.ts';

let t: TestApp;
let tenant: Tenant;

before(async () => {
  t = await startApp();
  tenant = await seedTenant(t.deps);
});
after(async () => {
  await t.close();
});

const factLines = (n: number, from = 0) =>
  Array.from({ length: n }, (_, i) =>
    JSON.stringify({ observed_at: new Date(Date.UTC(2025, 0, 1, 0, 0, from + i)).toISOString(), data: { k: `e${from + i}`, amount: i } }),
  );

/**
 * Imports `lines` in process (a plain array: every line is there at once, as a body already
 * in the socket's buffer is) and counts, beside the batches, the turns of the event loop
 * while it runs: a callback that queues itself again with setImmediate runs once per turn.
 */
async function importCounting(batching: ImportBatching, lines: string[]) {
  const m = await createModel(t.deps.db, tenant, [
    { name: 'k', type: 'string', is_primary_key: true },
    { name: 'amount', type: 'integer' },
  ]);
  const target = await resolveImportTarget(t.deps.db, { workspaceId: tenant.workspaceId, dataModelSlug: m.slug });
  let turns = 0;
  let running = true;
  const turn = () => {
    turns++;
    if (running) setImmediate(turn);
  };
  setImmediate(turn);
  const done: number[] = [];
  const turnsAtBatch: number[] = [];
  const result = await importFacts(t.deps.db, target, lines, {
    batching,
    onBatch: (n) => {
      done.push(n);
      turnsAtBatch.push(turns);
    },
  }).finally(() => (running = false));
  // Lines per batch; the last one is not told to onBatch (and is empty when the lines end with a batch).
  const sizes = [...done, result.lines].map((n, i, all) => n - (i === 0 ? 0 : all[i - 1]!)).filter((n) => n > 0);
  return { result, sizes, turnsAtBatch, stored: await factCount(t.deps.db, m.id) };
}

test('on PGlite, batches are sized by time; elsewhere by a count of lines', () => {
  assert.equal(IMPORT_BATCH.postgres.ms, undefined);
  assert.ok(IMPORT_BATCH.pglite.ms !== undefined && IMPORT_BATCH.pglite.ms > 0);
});

test('a batch that took longer than its time shrinks the next ones, down to the fewest lines, and the event loop turns between batches', async () => {
  // No batch's transaction can be done in a nanosecond: every batch after the first is the fewest lines.
  const { result, sizes, turnsAtBatch, stored } = await importCounting({ lines: 1000, ms: 1e-6 }, factLines(300));
  assert.equal(result.written, 300);
  assert.equal(stored, 300);
  assert.deepEqual(
    sizes.slice(1),
    Array.from({ length: sizes.length - 1 }, () => MIN_BATCH_LINES),
  );
  assert.ok(sizes[0]! <= 50, `first batch of ${sizes[0]} lines`);
  // At least one turn of the event loop between one batch and the next.
  for (let i = 1; i < turnsAtBatch.length; i++)
    assert.ok(turnsAtBatch[i]! > turnsAtBatch[i - 1]!, `no turn between batches ${i} and ${i + 1}: ${turnsAtBatch}`);
});

test('batches done well within their time grow to the most lines allowed', async () => {
  const { result, sizes, stored } = await importCounting({ lines: 120, ms: 1e9 }, factLines(500));
  assert.equal(result.written, 500);
  assert.equal(stored, 500);
  assert.deepEqual(sizes, [50, 120, 120, 120, 90]);
});

test('without a time, every batch is the count of lines', async () => {
  const { result, sizes, turnsAtBatch } = await importCounting({ lines: 100 }, factLines(450));
  assert.equal(result.written, 450);
  assert.deepEqual(sizes, [100, 100, 100, 100, 50]);
  for (let i = 1; i < turnsAtBatch.length; i++) assert.ok(turnsAtBatch[i]! > turnsAtBatch[i - 1]!, `no turn between batches ${i} and ${i + 1}`);
});

test("the engine's own batching: the event loop turns after every batch, none over its most lines", async () => {
  const batching = IMPORT_BATCH[t.deps.engine];
  const { result, sizes, turnsAtBatch } = await importCounting(batching, factLines(2500));
  assert.equal(result.written, 2500);
  assert.ok(sizes.length >= 3, `batches: ${sizes}`);
  assert.ok(Math.max(...sizes) <= batching.lines, `batches: ${sizes}`);
  if (batching.ms !== undefined) assert.equal(sizes[0], 50);
  for (let i = 1; i < turnsAtBatch.length; i++) assert.ok(turnsAtBatch[i]! > turnsAtBatch[i - 1]!, `no turn between batches ${i} and ${i + 1}`);
});
