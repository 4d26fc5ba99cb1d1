/**
 * Per-workspace quotas: what one workspace may hold (workflows, triggers, connectors, data
 * models and their fields) and how many of its runs may wait in the queue. Each is a
 * setting (config.ts, docs/configuration.md "Quotas"), and each refusal names its setting
 * and value: 422 invalid_request for what a create would hold past its limit, 429
 * rate_limited with Retry-After for runs past the waiting-runs limit (they drain by
 * themselves).
 *
 * Creates count inside their own transaction after lockWorkspaceQuotas, so two creates at
 * the last slot cannot both pass. A quota lowered below what a workspace holds refuses new
 * rows only: what exists stays and can still be saved.
 */
import type { Db } from '../db/connect.ts';
import { AppError } from '../errors.ts';
import { boundedMap } from '../bounded-map.ts';
import type { Config, Quotas } from '../config.ts';
import type { Metrics } from '../metrics.ts';
import * as q from './quotas.sql.ts';

export type QuotaName = keyof Quotas;

/** The setting that names each quota, as every refusal quotes it. */
export const QUOTA_SETTINGS: Readonly<Record<QuotaName, string>> = {
  workflows: 'QUOTA_WORKFLOWS',
  webhookTriggers: 'QUOTA_WEBHOOK_TRIGGERS',
  webhookTriggersPerWorkflow: 'QUOTA_WEBHOOK_TRIGGERS_PER_WORKFLOW',
  scheduleTriggers: 'QUOTA_SCHEDULE_TRIGGERS',
  connectors: 'QUOTA_CONNECTORS',
  dataModels: 'QUOTA_DATA_MODELS',
  fieldsPerDataModel: 'QUOTA_FIELDS_PER_DATA_MODEL',
  waitingRuns: 'QUOTA_WAITING_RUNS',
};

const WHAT: Readonly<Record<QuotaName, string>> = {
  workflows: 'workflows',
  webhookTriggers: 'webhook triggers',
  webhookTriggersPerWorkflow: 'webhook triggers',
  scheduleTriggers: 'schedule triggers',
  connectors: 'external connectors',
  dataModels: 'data models',
  fieldsPerDataModel: 'fields',
  waitingRuns: 'runs waiting in the queue (queued or retrying)',
};

/** "This workspace has 1000 workflows, its limit (QUOTA_WORKFLOWS = 1000)". */
export function quotaText(name: QuotaName, limit: number, holder = 'This workspace'): string {
  return `${holder} has ${limit} ${WHAT[name]}, its limit (${QUOTA_SETTINGS[name]} = ${limit})`;
}

export function quotaExceeded(name: QuotaName, limit: number, pointer: string, holder?: string): AppError {
  return new AppError('invalid_request', `${quotaText(name, limit, holder)}: no more can be created`, { source: { pointer } });
}

/** A new workflow: inside the save's transaction, before the insert. */
export async function checkWorkflowCreate(trx: Db, quotas: Quotas, workspaceId: string): Promise<void> {
  await q.lockWorkspaceQuotas(trx, workspaceId);
  if ((await q.countWorkflows(trx, workspaceId, quotas.workflows)) >= quotas.workflows)
    throw quotaExceeded('workflows', quotas.workflows, '/data/attributes/workflow_id');
}

/**
 * A workflow's triggers as saved: `counts` what the saved graph holds of each type, `before`
 * what the workflow held (nothing for a new one). A type only checks when the save adds to
 * it, so a workspace at its limit can still save its workflows unchanged or with fewer.
 */
export async function checkTriggers(
  trx: Db,
  quotas: Quotas,
  workspaceId: string,
  workflowId: string | null,
  counts: { webhook: number; schedule: number },
  before: { webhook: number; schedule: number },
): Promise<void> {
  const at = '/data/attributes/trigger_params';
  if (counts.webhook > before.webhook && counts.webhook > quotas.webhookTriggersPerWorkflow)
    throw quotaExceeded('webhookTriggersPerWorkflow', quotas.webhookTriggersPerWorkflow, at, 'A workflow');
  const adds = (['webhook', 'schedule'] as const).filter((type) => counts[type] > before[type]);
  if (adds.length === 0) return;
  await q.lockWorkspaceQuotas(trx, workspaceId);
  for (const type of adds) {
    const name = type === 'webhook' ? 'webhookTriggers' : 'scheduleTriggers';
    const limit = quotas[name];
    const others = await q.countTriggers(trx, workspaceId, type, workflowId, limit + 1);
    if (others + counts[type] > limit) throw quotaExceeded(name, limit, at);
  }
}

export async function checkConnectorCreate(trx: Db, quotas: Quotas, workspaceId: string): Promise<void> {
  await q.lockWorkspaceQuotas(trx, workspaceId);
  if ((await q.countConnectors(trx, workspaceId, quotas.connectors)) >= quotas.connectors) throw quotaExceeded('connectors', quotas.connectors, '/data');
}

export async function checkDataModelCreate(trx: Db, quotas: Quotas, workspaceId: string): Promise<void> {
  await q.lockWorkspaceQuotas(trx, workspaceId);
  if ((await q.countDataModels(trx, workspaceId, quotas.dataModels)) >= quotas.dataModels) throw quotaExceeded('dataModels', quotas.dataModels, '/data');
}

export async function checkFieldCreate(trx: Db, quotas: Quotas, workspaceId: string, dataModelId: string): Promise<void> {
  await q.lockWorkspaceQuotas(trx, workspaceId);
  const limit = quotas.fieldsPerDataModel;
  if ((await q.countFields(trx, workspaceId, dataModelId, limit)) >= limit)
    throw quotaExceeded('fieldsPerDataModel', limit, '/data/attributes/data_model_id', 'This data model');
}

/** Seconds a sender refused for waiting runs is asked to wait: the worker drains meanwhile. */
export const WAITING_RUNS_RETRY_AFTER_SECONDS = 5;

export function waitingRunsRefusal(limit: number): AppError {
  return new AppError('rate_limited', `${quotaText('waitingRuns', limit)}: retry once some have run`, {
    retryAfter: WAITING_RUNS_RETRY_AFTER_SECONDS,
  });
}

/**
 * The waiting-runs quota on the paths that queue runs (webhook deliveries, schedule ticks).
 * A workspace's count is read (bounded at the limit) at most once per WAITING_RUNS_TTL_MS
 * per process, and the runs this process queues meanwhile are added to it, so a delivery
 * costs a map lookup, not a count. What other processes queue within the TTL is seen at the
 * next read: the overshoot is bounded by what all processes accept in one TTL, documented.
 */
export interface WaitingRuns {
  /** Whether the workspace may queue one more run now. */
  admits(workspaceId: string): Promise<boolean>;
  /** A run was queued here: counted until the next read. */
  queued(workspaceId: string): void;
  readonly limit: number;
}

export const WAITING_RUNS_TTL_MS = 1000;
/** Workspaces whose count one process keeps: past it the oldest read goes, costing one count. */
const KEPT_COUNTS = 10_000;

export function waitingRuns(db: Db, clock: () => number, limit: number): WaitingRuns {
  const counts = boundedMap<string, { n: number; readAt: number }>(KEPT_COUNTS);
  // One read per workspace at a time: the deliveries that find the count stale together wait
  // for the same read (else each of 50 concurrent ones would count, once a second).
  const reading = new Map<string, Promise<{ n: number; readAt: number }>>();
  const read = (workspaceId: string, now: number) => {
    let pending = reading.get(workspaceId);
    if (pending === undefined) {
      pending = q
        .countWaitingRuns(db, workspaceId, limit)
        .then((n) => {
          const entry = { n, readAt: now };
          counts.set(workspaceId, entry);
          return entry;
        })
        .finally(() => reading.delete(workspaceId));
      reading.set(workspaceId, pending);
    }
    return pending;
  };
  return {
    limit,
    async admits(workspaceId) {
      const now = clock();
      let entry = counts.get(workspaceId);
      if (entry === undefined || now - entry.readAt >= WAITING_RUNS_TTL_MS || now < entry.readAt) entry = await read(workspaceId, now);
      return entry.n < limit;
    },
    queued(workspaceId) {
      const entry = counts.get(workspaceId);
      if (entry !== undefined) entry.n++;
    },
  };
}

/** A fresh, bounded count: for replays, which are rare enough to read it each time. 429 rate_limited past the limit. */
export async function checkWaitingRuns(deps: { db: Db; config: Config; metrics: Metrics }, workspaceId: string): Promise<void> {
  const limit = deps.config.quotas.waitingRuns;
  if ((await q.countWaitingRuns(deps.db, workspaceId, limit)) < limit) return;
  deps.metrics.quotaRefusal('waiting_runs', 'replay');
  throw waitingRunsRefusal(limit);
}

/**
 * Runs `write` after `check` in one transaction: `db`'s own when the caller already opened
 * one (services compose inside a caller's transaction), else a new short one.
 */
export function countedWrite<T>(db: Db, check: (trx: Db) => Promise<void>, write: (trx: Db) => Promise<T>): Promise<T> {
  const both = async (trx: Db) => {
    await check(trx);
    return write(trx);
  };
  return db.isTransaction ? both(db) : db.transaction().execute(both);
}
