/**
 * The import processes on their own: a document past the heap budget is refused saying so,
 * and the process it ended is replaced; close() ends every process.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { specImporter } from '../../src/openapi/import-pool.ts';
import { DocumentProblem } from '../../src/openapi/parse.ts';
import { bigSpec } from '../helpers/big-spec.ts';

it('a document past the memory budget is refused saying so; the next document gets a new process', async () => {
  const pool = specImporter({ processes: 1, queue: 1, timeoutMs: 600_000, heapMb: 32 });
  try {
    await assert.rejects(pool.importSpec(bigSpec(40_000, 'yaml'), 'yaml', { allowPrivateEgress: false }), (err: unknown) => {
      assert.ok(err instanceof DocumentProblem, String(err));
      assert.match(err.message, /exceeded its memory budget \(32 MB\)/);
      return true;
    });
    const spec = await pool.importSpec(bigSpec(3, 'json'), 'json', { allowPrivateEgress: false });
    assert.equal(spec.operations.length, 3);
    assert.deepEqual(pool.stats(), { started: 2, running: 0, waiting: 0 });
  } finally {
    await pool.close();
  }
});
