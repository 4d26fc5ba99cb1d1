/**
 * Saving a workflow's builder state: one transaction replaces the whole graph (the
 * workflow, its ordered steps, its triggers). The workflow row is locked first, so of two
 * saves composed against the same lock_version exactly one finds it current.
 *
 * lock_version names the saved graph: it is built from a revision counter that moves
 * exactly when the graph's canonical form changes, so a save that changes nothing keeps
 * it, and a graph changed and changed back still gets a new one (no ABA).
 */
import { createHash } from 'node:crypto';
import type { Principal } from '../../auth/principal.ts';
import { authorize } from '../../auth/access.ts';
import type { Db } from '../../db/connect.ts';
import type { Selectable } from 'kysely';
import type { WorkflowTable, WorkflowTriggerView } from '../../db/tables.ts';
import { AppError, fromPgError, invalidAt } from '../../errors.ts';
import { uuidv7 } from '../../ids.ts';
import type { InputSchema } from '../../input.ts';
import { canonicalJson, pointerToken } from '../../json.ts';
import { randomSecret, SECRET_PREFIX, sha256Hex } from '../../secrets.ts';
import { checkOrganization } from '../data_models/service.ts';
import { loadModels, type DataModelWithFields } from '../../facts/models.sql.ts';
import { allSteps, DEFAULT_WEBHOOK_ACCEPT, readDefinition, type Definition } from '../../workflows/definition.ts';
import { stepTypeOf } from '../../steps/index.ts';
import * as q from './workflows.sql.ts';
import { deleteWorkflowState } from '../../runs/state.sql.ts';
import { operationOf, unknownDriverOperationText, unknownOperationText } from '../../connectors/operations.ts';
import { DRIVER_OPERATIONS } from '../../connectors/drivers.ts';
import { statementIsLiteral } from '../../connectors/snowflake-sql.ts';
import type { Quotas } from '../../config.ts';
import { checkTriggers, checkWorkflowCreate } from '../../quotas/quotas.ts';
import { shortestInterval } from '../../triggers/schedule.ts';

/** Checked by readAttributes before a write sees attrs: the casts of its members in the writes below restate the kind each was checked to have. */
export const builderStateInput: InputSchema = {
  is_new_version: { kind: 'boolean', required: true },
  organization_id: { kind: 'string', required: true, max: 64 },
  workflow_id: { kind: 'id', nullable: true },
  wf_params: { kind: 'object', required: true, maxBytes: 65_536 },
  step_params: { kind: 'array', required: true, maxItems: 1000 },
  on_failure_params: { kind: 'array', nullable: true, maxItems: 1000 },
  trigger_params: { kind: 'array', required: true, maxItems: 1000 },
  // Only what lockVersionOf makes: anything else was never read from a workflow, which is bad input, not a conflict.
  lock_version: {
    kind: 'string',
    nullable: true,
    max: 200,
    trim: false,
    pattern: /^\d{1,16}\.[0-9a-f]{16}$/,
    patternText: 'must be the lock_version read from the workflow, such as "3.5f0c2a9d1e7b3c44"',
  },
};

const AT = '/data/attributes';

/**
 * A trigger as the graph hash reads it: a webhook's default `accept` left out, so a workflow
 * saved before triggers had it hashes as it did then, and saving it again unchanged keeps
 * its lock_version.
 */
function hashedView(t: WorkflowTriggerView): WorkflowTriggerView | Omit<WorkflowTriggerView & { type: 'webhook' }, 'accept'> {
  if (t.type !== 'webhook' || t.accept !== DEFAULT_WEBHOOK_ACCEPT) return t;
  const { accept: _accept, ...rest } = t;
  return rest;
}

/** wf_params as the graph hash reads it: no concurrency or state_key left out, so a workflow saved before they existed keeps its lock_version. */
function hashedWf(wf: Definition['wf']): Partial<Definition['wf']> {
  const { concurrency, state_key, ...rest } = wf;
  return { ...rest, ...(concurrency !== null ? { concurrency } : {}), ...(state_key !== null ? { state_key } : {}) };
}

function lockVersionOf(revision: number, graphHash: string): string {
  return `${revision}.${graphHash.slice(0, 16)}`;
}

/** Every step of the definition, nested and on_failure ones included, with its pointer. */
export const everyStep = (def: Pick<Definition, 'steps' | 'onFailure'>) => [
  ...allSteps(def.steps, `${AT}/step_params`),
  ...allSteps(def.onFailure, `${AT}/on_failure_params`),
];

/** References that only the database can check, checked inside the save's transaction. */
async function checkReferences(trx: Db, principal: Principal, def: Definition, existingTriggers: Map<string, { type: string }>): Promise<void> {
  const slugs = [...new Set(everyStep(def).flatMap(([s]) => stepTypeOf(s)?.describe(s.config).dataModel ?? []))];
  await q.shareModels(trx, principal.workspaceId, slugs);
  const models = slugs.length > 0 ? await loadModels(trx, principal.workspaceId, slugs) : new Map<string, DataModelWithFields>();
  everyStep(def).forEach(([step, pointer]) => {
    if (step.type !== 'write_fact') return;
    const at = `${pointer}/config`;
    const model = models.get(step.config.data_model_slug);
    if (!model)
      throw invalidAt(`${at}/data_model_slug`, `data_model_slug ${JSON.stringify(step.config.data_model_slug)} is not a data model of this workspace`);
    const mapping = step.config.mapping;
    if (mapping) {
      const names = new Set(model.fields.map((f) => f.name));
      for (const field of Object.keys(mapping)) {
        if (!names.has(field))
          throw invalidAt(`${at}/mapping/${pointerToken(field)}`, `${JSON.stringify(field)} is not a field of the data model ${model.slug}`);
      }
    }
  });
  await checkHttpSteps(trx, principal, def);
  const webhooks = def.triggers.filter((t) => t.type === 'webhook');
  const accounts = await q.activeAccounts(trx, principal.workspaceId, [...new Set(webhooks.map((t) => t.service_account_id))]);
  const connectors = await q.inboundConnectors(trx, principal.workspaceId, [
    ...new Set(webhooks.flatMap((t) => (t.inbound_connector_id ? [t.inbound_connector_id] : []))),
  ]);
  for (const t of def.triggers) {
    const at = `${AT}/trigger_params/${t.index}`;
    if (t.type === 'webhook' && !accounts.has(t.service_account_id))
      throw invalidAt(`${at}/service_account_id`, 'service_account_id must name an active service account of this workspace');
    if (t.type === 'webhook' && t.inbound_connector_id !== null && !connectors.has(t.inbound_connector_id))
      throw invalidAt(`${at}/inbound_connector_id`, 'inbound_connector_id must name an inbound connector of this workspace');
    const kept = t.id === null ? undefined : existingTriggers.get(t.id);
    if (t.id !== null && !kept) throw invalidAt(`${at}/id`, 'id must be the id of a trigger of this workflow (leave it out for a new trigger)');
    if (kept && kept.type !== t.type) throw invalidAt(`${at}/type`, `the trigger with this id is a ${kept.type} trigger: leave out the id for a new trigger`);
  }
}

/**
 * http_request steps: the connector is an outbound http connector of the workspace; an
 * operation_ref names an operation of its attached specification, and every required
 * parameter of that operation is given in params.
 */
async function checkHttpSteps(trx: Db, principal: Principal, def: Definition): Promise<void> {
  const ids = [...new Set(everyStep(def).flatMap(([s]) => stepTypeOf(s)?.describe(s.config).connector ?? []))];
  const connectors = await q.outboundConnectors(trx, principal.workspaceId, ids);
  everyStep(def).forEach(([step, pointer]) => {
    if (step.type !== 'http_request') return;
    const at = `${pointer}/config`;
    const c = connectors.get(step.config.connector_id);
    if (!c) throw invalidAt(`${at}/connector_id`, 'connector_id must name an outbound connector of this workspace');
    const ref = step.config.operation_ref;
    const driverOps = c.type === null ? undefined : DRIVER_OPERATIONS[c.type];
    if (driverOps) {
      if (ref === undefined || !driverOps.includes(ref))
        throw invalidAt(`${at}/${ref === undefined ? 'connector_id' : 'operation_ref'}`, unknownDriverOperationText(c.type!, ref, driverOps));
      if (c.type === 'snowflake' && (typeof step.config.body !== 'string' || !statementIsLiteral(step.config.body))) {
        throw invalidAt(
          `${at}/body`,
          'a snowflake statement is {"statement": "<SQL text, a literal>", "bindings": [...]}: values reach the SQL only as bindings',
        );
      }
    }
    if (ref === undefined) return;
    const op = operationOf(c.operations, ref);
    if (!op && driverOps) return;
    if (!op) throw invalidAt(`${at}/operation_ref`, `operation_ref ${unknownOperationText(ref, c.operations)}`);
    const given = new Set(Object.keys(step.config.params ?? {}));
    const missing = op.params.filter((p) => p.required && ['path', 'query', 'header'].includes(p.in) && !given.has(p.name));
    if (missing.length > 0)
      throw invalidAt(`${at}/params`, `the operation ${ref} requires ${missing.map((p) => `${p.name} (${p.in})`).join(', ')}: params must give them`);
    const declared = new Set(op.params.map((p) => p.name));
    const unknown = [...given].find((k) => !declared.has(k));
    if (unknown !== undefined)
      throw invalidAt(`${at}/params/${pointerToken(unknown)}`, `${JSON.stringify(unknown)} is not a parameter of the operation ${ref}`);
  });
}

export interface SavedWorkflow {
  row: Selectable<WorkflowTable>;
  /** Tokens of the triggers created by this save, by key: shown this once. */
  triggerTokens: Record<string, string>;
}

export interface SaveLimits {
  quotas: Quotas;
  /** SCHEDULE_MIN_INTERVAL_SECONDS */
  scheduleMinIntervalSeconds: number;
}

/** A schedule may not fire more often than SCHEDULE_MIN_INTERVAL_SECONDS: refused at save, naming it. */
function checkScheduleIntervals(def: Definition, minSeconds: number, now: Date): void {
  if (minSeconds <= 1) return; // a second is a schedule's finest step
  for (const t of def.triggers) {
    if (t.type !== 'schedule') continue;
    const gap = shortestInterval(t, now);
    if (gap !== undefined && gap < minSeconds * 1000)
      throw invalidAt(
        `${AT}/trigger_params/${t.index}/cron`,
        `cron fires as often as every ${gap / 1000} s; schedules of this installation fire at most every ${minSeconds} s (SCHEDULE_MIN_INTERVAL_SECONDS = ${minSeconds})`,
      );
  }
}

/**
 * What a save checks of a builder state (its shape, its schedules, who may call out, and the
 * references only the database knows), without saving: a test run of a definition is refused
 * exactly where its save would be. Triggers are checked as new ones: a file names none by id.
 */
export async function checkDefinition(db: Db, principal: Principal, attrs: Record<string, unknown>, now: Date, limits: SaveLimits): Promise<Definition> {
  const def = readDefinition(attrs);
  checkScheduleIntervals(def, limits.scheduleMinIntervalSeconds, now);
  if (everyStep(def).some(([s]) => stepTypeOf(s)?.describe(s.config).connector !== undefined)) authorize(principal, 'workflow.save_http_request');
  try {
    await db.transaction().execute((trx) => checkReferences(trx, principal, def, new Map()));
  } catch (err) {
    throw fromPgError(err);
  }
  return def;
}

/** `now`: when a schedule saved, changed or activated here starts counting ticks. */
export async function saveBuilderState(db: Db, principal: Principal, attrs: Record<string, unknown>, now: Date, limits: SaveLimits): Promise<SavedWorkflow> {
  checkOrganization(principal, attrs.organization_id);
  const def = readDefinition(attrs);
  checkScheduleIntervals(def, limits.scheduleMinIntervalSeconds, now);
  // An http_request step calls out with a connector's credentials, to a method and path the
  // step chooses: handing them to a workflow is for those who manage connectors.
  if (everyStep(def).some(([s]) => stepTypeOf(s)?.describe(s.config).connector !== undefined)) {
    authorize(principal, 'workflow.save_http_request');
  }
  const workflowId = (attrs.workflow_id as string | null | undefined) ?? null;
  const lockVersion = (attrs.lock_version as string | null | undefined) ?? null;
  const isNewVersion = attrs.is_new_version as boolean;
  try {
    return await db.transaction().execute(async (trx) => {
      const existing = workflowId === null ? undefined : await q.lockWorkflow(trx, principal.workspaceId, workflowId);
      if (workflowId !== null && !existing) throw new AppError('not_found', 'No workflow with this workflow_id', { source: { pointer: `${AT}/workflow_id` } });
      if (existing && lockVersion !== null && lockVersion !== existing.lock_version) {
        throw new AppError('stale_lock_version', 'The workflow was changed since this lock_version was read; read it again and reapply the change', {
          source: { pointer: `${AT}/lock_version` },
        });
      }
      const current = existing ? await q.triggersOf(trx, principal.workspaceId, existing.id) : [];
      const currentById = new Map(current.map((t) => [t.id, t]));
      await checkReferences(trx, principal, def, currentById);
      if (!existing) await checkWorkflowCreate(trx, limits.quotas, principal.workspaceId);
      const countOf = (list: ReadonlyArray<{ type: string }>) => ({
        webhook: list.filter((t) => t.type === 'webhook').length,
        schedule: list.filter((t) => t.type === 'schedule').length,
      });
      await checkTriggers(trx, limits.quotas, principal.workspaceId, existing?.id ?? null, countOf(def.triggers), countOf(current));

      const id = existing?.id ?? uuidv7();
      const version = existing ? existing.version + (isNewVersion ? 1 : 0) : 1;
      const triggerTokens: Record<string, string> = {};
      const newTriggers = def.triggers
        .filter((t) => t.id === null)
        .map((t) => {
          // A schedule is not called from outside: it has no token.
          if (t.type === 'schedule') return { ...t, id: uuidv7(), token_hash: null };
          const token = randomSecret(SECRET_PREFIX.triggerToken);
          triggerTokens[t.key] = token;
          return { ...t, id: uuidv7(), token_hash: sha256Hex(token) };
        });
      const byIndex = new Map(newTriggers.map((t) => [t.index, t.id]));
      const views: WorkflowTriggerView[] = def.triggers.map((t) => {
        const common = { id: t.id ?? byIndex.get(t.index)!, key: t.key };
        return t.type === 'schedule'
          ? { ...common, type: t.type, cron: t.cron, timezone: t.timezone, catch_up: t.catch_up }
          : { ...common, type: t.type, service_account_id: t.service_account_id, inbound_connector_id: t.inbound_connector_id, accept: t.accept };
      });
      const graphHash = createHash('sha256')
        // on_failure only when it has steps: a workflow saved before it hashes as it did then.
        .update(
          canonicalJson({
            wf: hashedWf(def.wf),
            steps: def.steps,
            ...(def.onFailure.length > 0 ? { on_failure: def.onFailure } : {}),
            triggers: views.map(hashedView),
            version,
          }),
        )
        .digest('hex');
      const changed = !existing || existing.graph_hash !== graphHash;
      const revision = existing ? existing.revision + (changed ? 1 : 0) : 1;
      const values = {
        name: def.wf.name,
        description: def.wf.description,
        is_active: def.wf.is_active,
        version,
        revision,
        graph_hash: graphHash,
        lock_version: lockVersionOf(revision, graphHash),
        steps: JSON.stringify(def.steps),
        on_failure: JSON.stringify(def.onFailure),
        triggers: JSON.stringify(views),
        concurrency: def.wf.concurrency === null ? null : JSON.stringify(def.wf.concurrency),
        state_key: def.wf.state_key,
      };
      if (existing && !changed) {
        // Saved again unchanged: its steps are now this member's to answer for.
        await q.recordSaver(trx, id, version, principal.membershipId);
        return { row: existing, triggerTokens };
      }

      const row = existing
        ? await q.updateWorkflow(trx, principal.workspaceId, id, { ...values, updated_at: now })
        : await q.insertWorkflow(trx, { id, organization_id: principal.organizationId, workspace_id: principal.workspaceId, ...values });
      await q.putVersion(trx, principal.workspaceId, {
        id: uuidv7(),
        workflowId: id,
        version,
        steps: def.steps,
        onFailure: def.onFailure,
        concurrency: def.wf.concurrency,
        stateKey: def.wf.state_key,
        savedBy: principal.membershipId,
      });
      // Triggers left out stop answering; kept ones keep their token; new ones get one.
      const kept = def.triggers.filter((t) => t.id !== null);
      await q.deleteTriggersExcept(
        trx,
        id,
        kept.map((t) => t.id!),
      );
      // Keys move between kept triggers only through a free key: clear them first.
      for (const t of kept) await q.updateTrigger(trx, t.id!, { key: `~${t.id}` });
      // Ticks while the workflow was inactive, or of a schedule since changed, are not missed ones.
      const activated = existing !== undefined && !existing.is_active && def.wf.is_active;
      for (const t of kept) {
        if (t.type === 'webhook') {
          await q.updateTrigger(trx, t.id!, {
            key: t.key,
            service_account_id: t.service_account_id,
            inbound_connector_id: t.inbound_connector_id,
            accept: t.accept,
            updated_at: now,
          });
          continue;
        }
        const was = currentById.get(t.id!)!;
        const moved = activated || was.cron !== t.cron || was.timezone !== t.timezone;
        await q.updateTrigger(trx, t.id!, {
          key: t.key,
          cron: t.cron,
          timezone: t.timezone,
          catch_up: t.catch_up,
          ...(moved ? { schedule_since: now } : {}),
          updated_at: now,
        });
      }
      await q.insertTriggers(
        trx,
        newTriggers.map((t) => ({
          id: t.id,
          workflow_id: id,
          organization_id: principal.organizationId,
          workspace_id: principal.workspaceId,
          key: t.key,
          type: t.type,
          token_hash: t.token_hash,
          ...(t.type === 'schedule'
            ? { cron: t.cron, timezone: t.timezone, catch_up: t.catch_up, schedule_since: now }
            : { service_account_id: t.service_account_id, inbound_connector_id: t.inbound_connector_id, accept: t.accept }),
        })),
      );
      return { row, triggerTokens };
    });
  } catch (err) {
    throw fromPgError(err);
  }
}

/**
 * DELETE a workflow: in one transaction its triggers go (so every process's next delivery
 * to them is 404, and no schedule of it fires again: both re-read the trigger rows in the
 * statement that accepts a run) and the row is marked deleted, inactive. Its runs, versions
 * and facts stay; runs already queued or retrying finish (their deliveries were accepted).
 * Its state goes: a set_state of such a run writes nothing (state.sql.ts).
 */
export async function deleteWorkflow(db: Db, principal: Principal, id: string, now: Date): Promise<void> {
  await db.transaction().execute(async (trx) => {
    const existing = await q.lockWorkflow(trx, principal.workspaceId, id);
    if (!existing) throw new AppError('not_found', 'No workflow with this id');
    await q.deleteTriggersExcept(trx, id, []);
    await q.markWorkflowDeleted(trx, principal.workspaceId, id, now);
    await deleteWorkflowState(trx, principal.workspaceId, id);
  });
}
