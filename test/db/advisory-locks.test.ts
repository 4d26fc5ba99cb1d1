/**
 * Every advisory lock id is listed once in src/db/advisory-locks.ts; two uses sharing an id
 * would wait on each other (or, worse, one would think it holds the other's lock). Three
 * branches of one change picked 7312 each, which is what this test is for.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ADVISORY_LOCK } from '../../src/db/advisory-locks.ts';

describe('advisory lock ids', () => {
  it('are all different', () => {
    const ids = Object.values(ADVISORY_LOCK).map(String);
    assert.equal(new Set(ids).size, ids.length, `an id is used twice: ${ids.join(', ')}`);
  });
});
