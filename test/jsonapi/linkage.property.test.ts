/**
 * Properties of relationship linkage in request documents (readAttributes): linkage is
 * the same as its *_id attribute, the two disagreeing is refused at the relationship, and
 * no relationships member, however odd, gets past validation or throws anything but a 4xx.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { AppError } from '../../src/errors.ts';
import { readAttributes } from '../../src/http/jsonapi/input.ts';
import type { InputSchema } from '../../src/input.ts';
import type { RelationshipSpec } from '../../src/resources/resource.ts';

const schema: InputSchema = {
  name: { kind: 'string', required: true, max: 63 },
  parent_id: { kind: 'string', required: true, max: 64 },
  owner_id: { kind: 'string', nullable: true, max: 64 },
};
const relationships: Record<string, RelationshipSpec> = {
  parent: { type: 'folder', kind: 'one', column: 'parent_id' },
  owner: { type: 'user', kind: 'one', column: 'owner_id' },
  children: { type: 'item', kind: 'many', foreignKey: 'parent_id' },
};
const target = { type: 'item', relationships };
const doc = (attributes: Record<string, unknown>, rels?: unknown, extra: Record<string, unknown> = {}) => ({
  data: { type: 'item', attributes, ...(rels === undefined ? {} : { relationships: rels }), ...extra },
});

function pointerOf(fn: () => unknown): string | undefined {
  try {
    fn();
    return undefined;
  } catch (err) {
    assert.ok(err instanceof AppError, `expected AppError, got ${String(err)}`);
    assert.ok(err.status >= 400 && err.status < 500);
    return err.source?.pointer ?? '';
  }
}

const id = fc.uuid();

describe('relationship linkage', () => {
  it('stands for its *_id attribute; links are ignored', () => {
    fc.assert(
      fc.property(id, fc.option(id, { nil: null }), fc.boolean(), (parent, owner, withLinks) => {
        const extra = withLinks ? { links: { self: '/x' } } : {};
        const viaLinkage = readAttributes(
          doc({ name: 'n' }, { parent: { data: { type: 'folder', id: parent } }, owner: { data: owner === null ? null : { type: 'user', id: owner } } }, extra),
          target,
          schema,
        );
        const viaAttributes = readAttributes(doc({ name: 'n', parent_id: parent, owner_id: owner }), target, schema);
        assert.deepEqual(viaLinkage, viaAttributes);
      }),
    );
  });

  it('given twice: accepted when the ids agree (in any case), refused at the relationship when not', () => {
    fc.assert(
      fc.property(id, id, fc.boolean(), (a, b, upper) => {
        const attrs = { name: 'n', parent_id: upper ? a.toUpperCase() : a };
        const run = () => readAttributes(doc(attrs, { parent: { data: { type: 'folder', id: b } } }), target, schema);
        if (a === b) assert.equal(pointerOf(run), undefined);
        else assert.equal(pointerOf(run), '/data/relationships/parent');
      }),
    );
  });

  it('anything else in relationships is a 4xx, never a pass with an odd value', () => {
    fc.assert(
      fc.property(fc.oneof(fc.anything(), fc.dictionary(fc.constantFrom('parent', 'owner', 'children', 'x'), fc.anything())), (rels) => {
        let out: Record<string, unknown> | undefined;
        try {
          out = readAttributes(doc({ name: 'n', parent_id: 'p' }, rels), target, schema);
        } catch (err) {
          assert.ok(err instanceof AppError && err.status >= 400 && err.status < 500, String(err));
          assert.match(err.source?.pointer ?? '', /^\/data\/relationships/);
          return;
        }
        for (const column of ['parent_id', 'owner_id']) {
          const v = out[column];
          assert.ok(v === undefined || v === null || (typeof v === 'string' && v.length > 0 && v.length <= 64), `${column}: ${JSON.stringify(v)}`);
        }
      }),
    );
  });
});
