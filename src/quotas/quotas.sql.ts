/**
 * The counts behind the per-workspace quotas (quotas.ts). Each counts at most `cap` rows
 * (the limit + 1): enough to say "at or past the limit" without reading a workspace's
 * whole table, so a count costs the same at 10 rows as at 10 million.
 */
import { sql } from 'kysely';
import type { Db } from '../db/connect.ts';
import { ADVISORY_LOCK } from '../db/advisory-locks.ts';

/**
 * Held until the transaction ends: creates of one workspace that a quota counts go one at
 * a time from here to their commit; other workspaces' do not wait.
 */
export async function lockWorkspaceQuotas(trx: Db, workspaceId: string): Promise<void> {
  await sql`select pg_advisory_xact_lock(${ADVISORY_LOCK.quota}, hashtext(${workspaceId}::text))`.execute(trx);
}

async function bounded(db: Db, rows: ReturnType<typeof sql>, cap: number): Promise<number> {
  const { rows: out } = await sql<{ n: number }>`select count(*)::int as n from (${rows} limit ${cap}) as r`.execute(db);
  return out[0]?.n ?? 0;
}

export function countWorkflows(db: Db, workspaceId: string, cap: number): Promise<number> {
  return bounded(db, sql`select 1 from workflows where workspace_id = ${workspaceId} and deleted_at is null`, cap);
}

/** Triggers of this type in the workspace, except those of `exceptWorkflowId` (the workflow being saved). */
export function countTriggers(db: Db, workspaceId: string, type: 'webhook' | 'schedule', exceptWorkflowId: string | null, cap: number): Promise<number> {
  const except = exceptWorkflowId === null ? sql`` : sql` and workflow_id <> ${exceptWorkflowId}`;
  return bounded(db, sql`select 1 from workflow_triggers where workspace_id = ${workspaceId} and type = ${type}${except}`, cap);
}

export function countConnectors(db: Db, workspaceId: string, cap: number): Promise<number> {
  return bounded(db, sql`select 1 from external_connectors where workspace_id = ${workspaceId}`, cap);
}

export function countDataModels(db: Db, workspaceId: string, cap: number): Promise<number> {
  return bounded(db, sql`select 1 from data_models where workspace_id = ${workspaceId}`, cap);
}

export function countFields(db: Db, workspaceId: string, dataModelId: string, cap: number): Promise<number> {
  return bounded(db, sql`select 1 from data_model_fields where workspace_id = ${workspaceId} and data_model_id = ${dataModelId}`, cap);
}

/** Runs of the workspace that wait for the worker: queued, or retrying (workflow_runs_ready_workspace_idx, whose predicate is the same). */
export function countWaitingRuns(db: Db, workspaceId: string, cap: number): Promise<number> {
  return bounded(db, sql`select 1 from workflow_runs where workspace_id = ${workspaceId} and status in ('queued', 'retrying')`, cap);
}
