/**
 * Forward-only migrations applied to a database that already holds data, as an upgrade
 * meets it: 0003 turns fact_current into a table partitioned by time axis and must keep
 * every row, the primary key, the axis check and the index names; 0014 gives the versions
 * saved before an id and their workflow's workspace; 0024 gives the triggers saved before
 * accept json.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { sql } from 'kysely';
import { Migrator } from 'kysely/migration';
import { createDb } from '../../src/db/connect.ts';
import { migrate, migrations } from '../../src/db/migrate.ts';
import * as m0001 from '../../src/db/migrations/0001_tenancy.ts';
import * as m0002 from '../../src/db/migrations/0002_facts.ts';
import { uuidv7 } from '../../src/ids.ts';
import { freshPostgresDatabase } from '../helpers/app.ts';

test('0003 keeps every fact_current row, key and index name, with the rows split by axis and data indexed', async () => {
  const fresh = process.env.DATABASE_URL ? await freshPostgresDatabase({ empty: true }) : undefined;
  const { db } = createDb({ databaseUrl: fresh?.url, dataDir: 'memory' });
  try {
    const before0003 = new Migrator({
      db,
      provider: { getMigrations: async () => ({ '0001_tenancy': m0001, '0002_facts': m0002 }) },
      migrationTableName: 'schema_migrations',
      migrationLockTableName: 'schema_migrations_lock',
    });
    assert.equal((await before0003.migrateToLatest()).error, undefined);

    const org = uuidv7();
    const ws = uuidv7();
    const model = uuidv7();
    await sql`insert into organizations (id, name, domain) values (${org}, 'O', 'o.example')`.execute(db);
    await sql`insert into workspaces (id, organization_id, name) values (${ws}, ${org}, 'W')`.execute(db);
    await sql`insert into data_models (id, organization_id, workspace_id, name, slug) values (${model}, ${org}, ${ws}, 'M', 'm')`.execute(db);
    const facts = [
      { id: uuidv7(), entity: 'e1', observed: '2026-01-01T00:00:00.000Z', data: { k: 'e1', n: 1 } },
      { id: uuidv7(), entity: 'e2', observed: '2026-01-02T00:00:00.000Z', data: { k: 'e2', s: 'x' } },
      { id: uuidv7(), entity: null, observed: '2026-01-03T00:00:00.000Z', data: { n: 3 } },
    ];
    for (const f of facts) {
      await sql`insert into facts (id, organization_id, workspace_id, data_model_id, entity_id, observed_at, data, source_key)
        values (${f.id}, ${org}, ${ws}, ${model}, ${f.entity}, ${f.observed}, ${JSON.stringify(f.data)}::jsonb, ${`k:${f.id}`})`.execute(db);
      for (const axis of ['observed_at', 'inserted_at']) {
        await sql`insert into fact_current (data_model_id, axis, entity_key, fact_id, workspace_id, entity_id, observed_at, inserted_at, data)
          select data_model_id, ${axis}, coalesce(entity_id, '#' || id::text), id, workspace_id, entity_id, observed_at, inserted_at, data
          from facts where id = ${f.id}`.execute(db);
      }
    }
    const current = async () =>
      (await sql<Record<string, unknown>>`select * from fact_current order by data_model_id, axis, entity_key`.execute(db)).rows.map((r) => ({ ...r }));
    const rows = await current();
    assert.equal(rows.length, 6);

    assert.deepEqual(await migrate(db), [
      '0003_fact_current_reads',
      '0004_timestamptz_or_null',
      '0005_external_connectors',
      '0006_workflows',
      '0007_api_specs',
      '0008_rate_windows',
      '0009_run_lease_losses',
      '0010_workflow_version_saver',
      '0011_api_spec_answer_bytes',
      '0012_schedule_triggers',
      '0013_run_outcomes',
      '0014_console_reads',
      '0015_run_trace_context',
      '0016_sealed_idempotency_answers',
      '0017_indexed_fields',
      '0018_fact_current_inserted_index',
      '0019_quota_counts',
      '0020_fair_claims',
      '0021_workflow_deleted_at',
      '0023_replayed_delivery_id',
      '0024_webhook_accept',
      '0025_run_checkpoint',
      '0026_on_failure_steps',
      '0027_run_waits',
      '0028_concurrency_keys',
      '0029_workflow_state',
      '0030_state_keys',
      '0031_typed_slots',
    ]);
    // 0031 adds the typed slots, null on the rows of before (no field has a slot yet).
    const after = await current();
    for (const r of after) for (const [k, v] of Object.entries(r)) if (/^(num|txt|ts)_\d$/.test(k)) assert.equal(v, null, k);
    assert.deepEqual(
      after.map((r) => Object.fromEntries(Object.entries(r).filter(([k]) => !/^(num|txt|ts)_\d$/.test(k)))),
      rows,
    );

    const partitions = await sql<{ name: string; rows: number }>`
      select c.relname as name, (select count(*)::int from fact_current fc where fc.tableoid = c.oid) as rows
      from pg_inherits i join pg_class c on c.oid = i.inhrelid
      where i.inhparent = 'fact_current'::regclass order by c.relname`.execute(db);
    assert.deepEqual(partitions.rows, [
      { name: 'fact_current_inserted', rows: 3 },
      { name: 'fact_current_observed', rows: 3 },
    ]);
    const indexes = await sql<{ indexname: string }>`
      select indexname from pg_indexes where schemaname = current_schema() and tablename = 'fact_current' order by indexname`.execute(db);
    assert.deepEqual(
      indexes.rows.map((r) => r.indexname),
      ['fact_current_data_idx', 'fact_current_fact_idx', 'fact_current_observed_idx', 'fact_current_pkey'],
    );
    // 0018: the inserted_at index on the inserted_at partition only (no read of the other used it).
    const onInserted = await sql<{ tablename: string }>`
      select tablename from pg_indexes where schemaname = current_schema() and indexname = 'fact_current_inserted_idx'`.execute(db);
    assert.deepEqual(onInserted.rows, [{ tablename: 'fact_current_inserted' }]);

    const insert = (axis: string, key: string) =>
      sql`insert into fact_current (data_model_id, axis, entity_key, fact_id, workspace_id, entity_id, observed_at, inserted_at, data)
      values (${model}, ${axis}, ${key}, ${facts[0]!.id}, ${ws}, ${key}, now(), now(), '{}'::jsonb)`.execute(db);
    await assert.rejects(insert('observed_at', 'e1'), (err: { code?: string }) => err.code === '23505', 'the primary key still holds');
    await assert.rejects(insert('sideways', 'e9'), (err: { code?: string }) => err.code === '23514', 'an unknown axis is refused by the check');
    const constraints = await sql<{ conname: string; contype: string }>`
      select conname, contype from pg_constraint where conrelid = 'fact_current'::regclass and contype in ('c', 'f', 'p') order by conname`.execute(db);
    assert.deepEqual(constraints.rows, [
      { conname: 'fact_current_axis_check', contype: 'c' },
      { conname: 'fact_current_data_model_id_fkey', contype: 'f' },
      { conname: 'fact_current_pkey', contype: 'p' },
    ]);
    await assert.rejects(
      sql`insert into fact_current (data_model_id, axis, entity_key, fact_id, workspace_id, entity_id, observed_at, inserted_at, data)
        values (${uuidv7()}, 'observed_at', 'x', ${facts[0]!.id}, ${ws}, 'x', now(), now(), '{}'::jsonb)`.execute(db),
      (err: { code?: string }) => err.code === '23503',
      'the data model must exist',
    );
  } finally {
    await db.destroy();
    await fresh?.drop();
  }
});

test('0014 gives every saved workflow version an id and its workflow workspace; api_specs keep their answer_bytes', async () => {
  const fresh = process.env.DATABASE_URL ? await freshPostgresDatabase({ empty: true }) : undefined;
  const { db } = createDb({ databaseUrl: fresh?.url, dataDir: 'memory' });
  try {
    const before0014 = new Migrator({
      db,
      provider: { getMigrations: async () => Object.fromEntries(Object.entries(migrations).filter(([name]) => name < '0014')) },
      migrationTableName: 'schema_migrations',
      migrationLockTableName: 'schema_migrations_lock',
    });
    assert.equal((await before0014.migrateToLatest()).error, undefined);
    const org = uuidv7();
    const workspaces = [uuidv7(), uuidv7()];
    await sql`insert into organizations (id, name, domain) values (${org}, 'O', 'o.example')`.execute(db);
    const workflows: string[] = [];
    for (const ws of workspaces) {
      await sql`insert into workspaces (id, organization_id, name) values (${ws}, ${org}, 'W')`.execute(db);
      const wf = uuidv7();
      workflows.push(wf);
      await sql`insert into workflows (id, organization_id, workspace_id, name, graph_hash, lock_version, steps, triggers)
        values (${wf}, ${org}, ${ws}, 'F', 'h', '1.h', '[]'::jsonb, '[]'::jsonb)`.execute(db);
      for (const version of [1, 2]) await sql`insert into workflow_versions (workflow_id, version, steps) values (${wf}, ${version}, '[]'::jsonb)`.execute(db);
    }
    await sql`insert into api_specs (id, organization_id, workspace_id, name, format, raw_document, servers, security_schemes, operations)
      values (${uuidv7()}, ${org}, ${workspaces[0]}, 'S', 'json', '{}', '[]'::jsonb, '{}'::jsonb, '[]'::jsonb)`.execute(db);

    assert.deepEqual(await migrate(db), [
      '0014_console_reads',
      '0015_run_trace_context',
      '0016_sealed_idempotency_answers',
      '0017_indexed_fields',
      '0018_fact_current_inserted_index',
      '0019_quota_counts',
      '0020_fair_claims',
      '0021_workflow_deleted_at',
      '0023_replayed_delivery_id',
      '0024_webhook_accept',
      '0025_run_checkpoint',
      '0026_on_failure_steps',
      '0027_run_waits',
      '0028_concurrency_keys',
      '0029_workflow_state',
      '0030_state_keys',
      '0031_typed_slots',
    ]);
    const versions = await sql<{ id: string; workspace_id: string; workflow_id: string }>`
      select id, workspace_id, workflow_id from workflow_versions`.execute(db);
    assert.equal(versions.rows.length, 4);
    assert.equal(new Set(versions.rows.map((v) => v.id)).size, 4, 'an id each');
    for (const v of versions.rows) assert.equal(v.workspace_id, workspaces[workflows.indexOf(v.workflow_id)]);
    const spec = await sql<{ answer_bytes: string; last_changes: unknown }>`select answer_bytes, last_changes from api_specs`.execute(db);
    assert.deepEqual(
      spec.rows.map((r) => [Number(r.answer_bytes), r.last_changes]),
      [[8, null]],
    );
  } finally {
    await db.destroy();
    await fresh?.drop();
  }
});

test('a database migrated by a newer release is refused with what to do, and left as it was', async () => {
  const fresh = process.env.DATABASE_URL ? await freshPostgresDatabase({ empty: true }) : undefined;
  const { db } = createDb({ databaseUrl: fresh?.url, dataDir: 'memory' });
  try {
    await migrate(db);
    await sql`insert into schema_migrations (name, timestamp) values ('9999_from_the_future', '2099-01-01T00:00:00Z')`.execute(db);
    await assert.rejects(migrate(db), {
      message:
        "the database was migrated by a newer release (its migration 9999_from_the_future is unknown to this one): start this release's version or newer (docs/deployment.md, Upgrades)",
    });
    const names = await sql<{ name: string }>`select name from schema_migrations order by name`.execute(db);
    assert.deepEqual(
      names.rows.map((r) => r.name),
      [...Object.keys(migrations), '9999_from_the_future'],
    );
  } finally {
    await db.destroy();
    await fresh?.drop();
  }
});

test('0024 gives every trigger saved before accept json, and its check refuses anything but json or form', async () => {
  const fresh = process.env.DATABASE_URL ? await freshPostgresDatabase({ empty: true }) : undefined;
  const { db } = createDb({ databaseUrl: fresh?.url, dataDir: 'memory' });
  try {
    const before0024 = new Migrator({
      db,
      provider: { getMigrations: async () => Object.fromEntries(Object.entries(migrations).filter(([name]) => name < '0024')) },
      migrationTableName: 'schema_migrations',
      migrationLockTableName: 'schema_migrations_lock',
    });
    assert.equal((await before0024.migrateToLatest()).error, undefined);
    const [org, ws, wf, trigger] = [uuidv7(), uuidv7(), uuidv7(), uuidv7()];
    await sql`insert into organizations (id, name, domain) values (${org}, 'O', 'o.example')`.execute(db);
    await sql`insert into workspaces (id, organization_id, name) values (${ws}, ${org}, 'W')`.execute(db);
    await sql`insert into workflows (id, organization_id, workspace_id, name, graph_hash, lock_version, steps, triggers)
      values (${wf}, ${org}, ${ws}, 'F', 'h', '1.h', '[]'::jsonb, '[]'::jsonb)`.execute(db);
    await sql`insert into workflow_triggers (id, workflow_id, organization_id, workspace_id, key, type, cron, timezone, catch_up, schedule_since)
      values (${trigger}, ${wf}, ${org}, ${ws}, 'tick', 'schedule', '0 * * * *', 'UTC', 'latest', now())`.execute(db);

    assert.deepEqual(await migrate(db), [
      '0024_webhook_accept',
      '0025_run_checkpoint',
      '0026_on_failure_steps',
      '0027_run_waits',
      '0028_concurrency_keys',
      '0029_workflow_state',
      '0030_state_keys',
      '0031_typed_slots',
    ]);
    const rows = await sql<{ accept: string }>`select accept from workflow_triggers`.execute(db);
    assert.deepEqual(rows.rows, [{ accept: 'json' }]);
    await sql`update workflow_triggers set accept = 'form' where id = ${trigger}`.execute(db);
    await assert.rejects(sql`update workflow_triggers set accept = 'xml' where id = ${trigger}`.execute(db), (err: { code?: string }) => err.code === '23514');
  } finally {
    await db.destroy();
    await fresh?.drop();
  }
});
