/**
 * Forward-only migrations, imported statically so a bundle or a fresh clone needs no
 * file-system discovery. On PostgreSQL, Kysely's Migrator holds a session advisory lock
 * (ADVISORY_LOCK.migrate) for its run, inside a transaction, so concurrent starts against one
 * PostgreSQL take turns and run each migration once.
 */
import { Migrator, type Migration, type MigrationProvider } from 'kysely/migration';
import type { Db } from './connect.ts';
import * as m0001 from './migrations/0001_tenancy.ts';
import * as m0002 from './migrations/0002_facts.ts';
import * as m0003 from './migrations/0003_fact_current_reads.ts';
import * as m0004 from './migrations/0004_timestamptz_or_null.ts';
import * as m0005 from './migrations/0005_external_connectors.ts';
import * as m0006 from './migrations/0006_workflows.ts';
import * as m0007 from './migrations/0007_api_specs.ts';
import * as m0008 from './migrations/0008_rate_windows.ts';
import * as m0009 from './migrations/0009_run_lease_losses.ts';
import * as m0010 from './migrations/0010_workflow_version_saver.ts';
import * as m0011 from './migrations/0011_api_spec_answer_bytes.ts';
import * as m0012 from './migrations/0012_schedule_triggers.ts';
import * as m0013 from './migrations/0013_run_outcomes.ts';
import * as m0014 from './migrations/0014_console_reads.ts';
import * as m0015 from './migrations/0015_run_trace_context.ts';
import * as m0016 from './migrations/0016_sealed_idempotency_answers.ts';
import * as m0017 from './migrations/0017_indexed_fields.ts';
import * as m0018 from './migrations/0018_fact_current_inserted_index.ts';
import * as m0019 from './migrations/0019_quota_counts.ts';
import * as m0020 from './migrations/0020_fair_claims.ts';
import * as m0021 from './migrations/0021_workflow_deleted_at.ts';
import * as m0023 from './migrations/0023_replayed_delivery_id.ts';
import * as m0024 from './migrations/0024_webhook_accept.ts';
import * as m0025 from './migrations/0025_run_checkpoint.ts';
import * as m0026 from './migrations/0026_on_failure_steps.ts';
import * as m0027 from './migrations/0027_run_waits.ts';
import * as m0028 from './migrations/0028_concurrency_keys.ts';
import * as m0029 from './migrations/0029_workflow_state.ts';
import * as m0030 from './migrations/0030_state_keys.ts';
import * as m0031 from './migrations/0031_typed_slots.ts';

export const migrations: Record<string, Migration> = {
  '0001_tenancy': m0001,
  '0002_facts': m0002,
  '0003_fact_current_reads': m0003,
  '0004_timestamptz_or_null': m0004,
  '0005_external_connectors': m0005,
  '0006_workflows': m0006,
  '0007_api_specs': m0007,
  '0008_rate_windows': m0008,
  '0009_run_lease_losses': m0009,
  '0010_workflow_version_saver': m0010,
  '0011_api_spec_answer_bytes': m0011,
  '0012_schedule_triggers': m0012,
  '0013_run_outcomes': m0013,
  '0014_console_reads': m0014,
  '0015_run_trace_context': m0015,
  '0016_sealed_idempotency_answers': m0016,
  '0017_indexed_fields': m0017,
  '0018_fact_current_inserted_index': m0018,
  '0019_quota_counts': m0019,
  '0020_fair_claims': m0020,
  '0021_workflow_deleted_at': m0021,
  '0023_replayed_delivery_id': m0023,
  '0024_webhook_accept': m0024,
  '0025_run_checkpoint': m0025,
  '0026_on_failure_steps': m0026,
  '0027_run_waits': m0027,
  '0028_concurrency_keys': m0028,
  '0029_workflow_state': m0029,
  '0030_state_keys': m0030,
  '0031_typed_slots': m0031,
};

const provider: MigrationProvider = { getMigrations: async () => migrations };

export async function migrate(db: Db): Promise<string[]> {
  const migrator = new Migrator({ db, provider, migrationTableName: 'schema_migrations', migrationLockTableName: 'schema_migrations_lock' });
  const { error, results } = await migrator.migrateToLatest();
  if (error) throw newerSchema(error) ?? (error instanceof Error ? error : new Error(String(error)));
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
}

/**
 * Kysely calls a database migrated by a newer release "corrupted"; an operator meets it when
 * an old process restarts mid-upgrade, so say what it is and what to do.
 */
function newerSchema(error: unknown): Error | undefined {
  const missing = /previously executed migration (\S+) is missing/.exec(error instanceof Error ? error.message : String(error))?.[1];
  if (missing === undefined) return undefined;
  return new Error(
    `the database was migrated by a newer release (its migration ${missing} is unknown to this one): start this release's version or newer (docs/deployment.md, Upgrades)`,
  );
}
