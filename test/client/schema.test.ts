/**
 * The SDK's types come from the server's own OpenAPI document: the committed schema.d.ts is
 * what the generator writes today (so it cannot drift), and the types derived from it accept
 * what the server takes and refuse what it does not (checked by tsc: a wrong line fails the
 * type check through its @ts-expect-error).
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { it } from 'node:test';
import { generateSchema, SCHEMA_FILE } from '../../packages/client/scripts/generate.ts';
import { queryString } from '../../packages/client/src/index.ts';
import type {
  Collection,
  Creatable,
  CreateData,
  FilterField,
  ReplayVersion,
  ResourceOf,
  Updatable,
  UpdateData,
  WebhookAccepted,
} from '../../packages/client/src/index.ts';

it('packages/client/src/schema.d.ts is what the generator writes from the document the server serves', async () => {
  const committed = fs.readFileSync(SCHEMA_FILE, 'utf8');
  const generated = await generateSchema();
  assert.ok(generated.includes('"/api/json/v1/workflow_runs/replay"'));
  assert.ok(committed === generated, 'packages/client/src/schema.d.ts is stale: run `node packages/client/scripts/generate.ts` and commit it');
});

it('the typed surface follows the schema', () => {
  const collection: Collection = 'workflow_runs';
  const creatable: Creatable = 'data_models';
  // @ts-expect-error runs are not created with POST /workflow_runs
  const notCreatable: Creatable = 'workflow_runs';
  const updatable: Updatable = 'data_models';
  const runType: ResourceOf<'workflow_runs'>['type'] = 'workflow_run';
  const create: CreateData<'data_models'> = { type: 'data_model', attributes: { name: 'a', slug: 'b' } };
  // @ts-expect-error the type member must be the collection's type
  const wrongType: CreateData<'data_models'> = { type: 'workflow', attributes: { name: 'a', slug: 'b' } };
  // @ts-expect-error slug is required when creating
  const missing: CreateData<'data_models'> = { type: 'data_model', attributes: { name: 'a' } };
  const update: UpdateData<'data_models'> = { type: 'data_model', attributes: { description: 'c' } };
  const filter: FilterField<'workflow_runs'> = 'status';
  // @ts-expect-error no such filter on runs
  const noFilter: FilterField<'workflow_runs'> = 'colour';
  const version: ReplayVersion = 'current';
  // @ts-expect-error replay takes original or current
  const badVersion: ReplayVersion = 'latest';
  const answer: WebhookAccepted = { status: 'duplicate' };
  assert.ok(
    [collection, creatable, notCreatable, updatable, runType, create, wrongType, missing, update, filter, noFilter, version, badVersion, answer].length > 0,
  );
});

it('list options become the JSON:API query string', () => {
  assert.equal(
    decodeURIComponent(
      queryString({
        filter: { status: 'failed', inserted_at: { gte: '2026-01-01T00:00:00Z' }, trigger_key: ['a', 'b'] },
        sort: ['-inserted_at', 'id'],
        include: 'workflow',
        fields: { workflow_run: ['status', 'outcome'] },
        page: { limit: 10 },
      } as never),
    ),
    '?filter[status]=failed&filter[inserted_at][gte]=2026-01-01T00:00:00Z&filter[trigger_key]=a,b&sort=-inserted_at,id&include=workflow&fields[workflow_run]=status,outcome&page[limit]=10',
  );
  assert.equal(queryString({}), '');
});
