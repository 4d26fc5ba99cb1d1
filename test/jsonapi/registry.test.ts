/** The static registry of JSON:API types: complete, and checked when it is built. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { typeRegistry, type ResourceType } from '../../src/resources/resource.ts';
import { RESOURCE_TYPES } from '../../src/resources/types.ts';

test('every relationship of every type names a type of the registry', () => {
  for (const t of RESOURCE_TYPES.values()) {
    for (const [name, rel] of Object.entries(t.relationships)) assert.ok(RESOURCE_TYPES.get(rel.type), `${t.type}.${name} -> ${rel.type}`);
  }
  assert.equal(RESOURCE_TYPES.get('data_model')?.path, 'data_models');
});

test('a registry with a dangling relationship or a type declared twice is refused when built', () => {
  const base = RESOURCE_TYPES.get('workspace')!;
  const dangling: ResourceType = { ...base, relationships: { owner: { type: 'nobody', kind: 'one', column: 'organization_id' } } };
  assert.throws(() => typeRegistry([dangling]), /names the undeclared type nobody/);
  assert.throws(
    () =>
      typeRegistry([
        { ...base, relationships: {} },
        { ...base, relationships: {} },
      ]),
    /declared twice/,
  );
});
