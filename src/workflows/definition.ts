/**
 * The builder state's inner structure (docs/workflows.md): wf_params, step_params and
 * trigger_params, checked member by member with a pointer into the request document, so a
 * client can show the error beside the input that caused it. Only the shape and the
 * expressions are checked here; what needs the database (slugs, accounts, connectors,
 * trigger ids) is checked by save.ts inside its transaction.
 */
import { invalidAt, quoteName } from '../errors.ts';
import { isObject } from '../json.ts';
import type { WebhookAccept, WorkflowConcurrency, WorkflowStep } from '../db/tables.ts';
import { CONCURRENCY_LIMITS } from '../runs/concurrency.ts';
import { MAX_STATE_KEY_EXPRESSION } from '../runs/state-key.ts';
import { isUuid } from '../ids.ts';
import { ConfigIssue, expression, MAX_MAPPING_FIELDS, onlyMembers, text } from '../steps/config.ts';
import { isStepType, STEP_TYPES, STEP_TYPES_BY_TYPE, stepTypeOf } from '../steps/index.ts';
import { stepRefProblem } from './step-refs.ts';
import { CATCH_UP, DEFAULT_CATCH_UP, DEFAULT_TIMEZONE, scheduleProblem, type CatchUp } from '../triggers/schedule.ts';

export const WORKFLOW_LIMITS = {
  /** Steps of one list: the workflow's, a branch's, a for_each's, on_failure's. */
  maxSteps: 50,
  /** Steps across the whole tree, nested ones and on_failure included. */
  maxTotalSteps: 200,
  /** How deep lists nest: the workflow's own steps are at depth 1, a switch's or for_each's steps one deeper. */
  maxDepth: 4,
  maxTriggers: 20,
  maxMappingFields: MAX_MAPPING_FIELDS,
} as const;

export const TRIGGER_TYPES = ['webhook', 'schedule'] as const;
/** A webhook trigger's `accept`: the bodies it takes besides JSON (docs/webhooks.md, Form posts). */
export const WEBHOOK_ACCEPT = ['json', 'form'] as const satisfies readonly WebhookAccept[];
export const DEFAULT_WEBHOOK_ACCEPT: WebhookAccept = 'json';

/** Step and trigger keys: JSONata names them (`steps.normalize`), so identifier-like. */
export const KEY_RE = /^[a-z][a-z0-9_]{0,62}$/;
const KEY_TEXT = 'must start with a lowercase letter and hold only lowercase letters, digits and underscores (at most 63)';

const AT = '/data/attributes';

export interface WfParams {
  name: string;
  description: string | null;
  is_active: boolean;
  /** Null: runs are not limited by key. */
  concurrency: WorkflowConcurrency | null;
  /** The key expression of the workflow's state documents; null: the one document (key ''). */
  state_key: string | null;
}

interface TriggerCommon {
  /** Index in trigger_params, for pointers. */
  index: number;
  id: string | null;
  key: string;
}

export interface WebhookTriggerInput extends TriggerCommon {
  type: 'webhook';
  service_account_id: string;
  inbound_connector_id: string | null;
  accept: WebhookAccept;
}

export interface ScheduleTriggerInput extends TriggerCommon {
  type: 'schedule';
  cron: string;
  timezone: string;
  catch_up: CatchUp;
}

export type TriggerInput = WebhookTriggerInput | ScheduleTriggerInput;

export interface Definition {
  wf: WfParams;
  steps: WorkflowStep[];
  /** Run once when a run fails for good, with `failure` in their context. */
  onFailure: WorkflowStep[];
  triggers: TriggerInput[];
}

function readWfParams(v: unknown): WfParams {
  const at = `${AT}/wf_params`;
  if (!isObject(v)) throw new ConfigIssue(at, 'wf_params must be an object');
  onlyMembers(v, ['name', 'description', 'is_active', 'concurrency', 'state_key'], at, 'wf_params');
  const name = text(v, 'name', at, { required: true, max: 200 })!;
  const description = text(v, 'description', at, { required: false, max: 4000 });
  const active = v.is_active;
  if (active !== undefined && typeof active !== 'boolean') throw new ConfigIssue(`${at}/is_active`, 'is_active must be true or false');
  return {
    name: name.trim(),
    description,
    is_active: active ?? true,
    concurrency: readConcurrency(v.concurrency, `${at}/concurrency`),
    state_key: readStateKey(v, at),
  };
}

/** wf_params.state_key: an expression over payload and delivery, or null (docs/workflows.md, "Workflow state"). */
function readStateKey(v: Record<string, unknown>, at: string): string | null {
  if (v.state_key === undefined || v.state_key === null) return null;
  const key = expression(v, 'state_key', at, true)!;
  if (key.length > MAX_STATE_KEY_EXPRESSION) throw new ConfigIssue(`${at}/state_key`, `state_key must be at most ${MAX_STATE_KEY_EXPRESSION} characters`);
  return key;
}

/** wf_params.concurrency: {key, limit}, or null (docs/workflows.md, "Concurrency"). */
function readConcurrency(v: unknown, at: string): WorkflowConcurrency | null {
  if (v === undefined || v === null) return null;
  if (!isObject(v)) throw new ConfigIssue(at, 'concurrency must be an object {key, limit} or null');
  onlyMembers(v, ['key', 'limit'], at, 'concurrency');
  const key = expression(v, 'key', at, true)!;
  if (key.length > CONCURRENCY_LIMITS.maxKeyExpression)
    throw new ConfigIssue(`${at}/key`, `key must be at most ${CONCURRENCY_LIMITS.maxKeyExpression} characters`);
  const limit = v.limit;
  if (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 1 || limit > CONCURRENCY_LIMITS.maxLimit)
    throw new ConfigIssue(`${at}/limit`, `limit must be a whole number from 1 to ${CONCURRENCY_LIMITS.maxLimit} (runs of one key executing at once)`);
  return { key, limit };
}

function readStep(key: string, type: WorkflowStep['type'], config: Record<string, unknown>, at: string): WorkflowStep {
  const checked = STEP_TYPES_BY_TYPE[type].validate(config);
  if (!checked.ok) throw new ConfigIssue(`${at}${checked.issues[0]!.pointer}`, checked.issues[0]!.detail);
  return { key, type, config: checked.config } as WorkflowStep;
}

/** What the reading of one workflow's step tree has seen so far. */
interface Tree {
  /** Every key, and whether it is a top-level step (`later` when not yet readable) or a nested one. */
  keys: Map<string, 'later' | 'nested'>;
  total: number;
}

interface ListPlace {
  depth: number;
  /** Inside a for_each's steps: no step may wait there. */
  inItem: boolean;
  /** on_failure's steps: no step may wait there either (the run has failed). */
  inOnFailure: boolean;
}

/** One list of steps, and the lists its steps hold (a switch's branches, a for_each's steps), each checked at its pointer. */
function readList(v: unknown, at: string, name: string, tree: Tree, place: ListPlace): WorkflowStep[] {
  if (!Array.isArray(v)) throw new ConfigIssue(at, `${name} must be an array`);
  if (v.length > WORKFLOW_LIMITS.maxSteps) throw new ConfigIssue(at, `${name} may hold at most ${WORKFLOW_LIMITS.maxSteps} steps`);
  return v.map((step, i) => {
    const sat = `${at}/${i}`;
    if (!isObject(step)) throw new ConfigIssue(sat, 'a step must be an object {key, type, config}');
    onlyMembers(step, ['key', 'type', 'config'], sat, 'a step');
    if (typeof step.key !== 'string' || !KEY_RE.test(step.key)) throw new ConfigIssue(`${sat}/key`, `key ${KEY_TEXT}`);
    // Unique across the whole workflow: a step's record, checkpoint and `steps.<key>` name it by key alone.
    if (tree.keys.has(step.key)) throw new ConfigIssue(`${sat}/key`, `key ${quoteName(step.key)} is used by another step of this workflow`);
    tree.keys.set(step.key, place.depth === 1 && !place.inOnFailure ? 'later' : 'nested');
    if (++tree.total > WORKFLOW_LIMITS.maxTotalSteps)
      throw new ConfigIssue(sat, `a workflow may hold at most ${WORKFLOW_LIMITS.maxTotalSteps} steps in all (nested ones and on_failure included)`);
    if (!isStepType(step.type)) throw new ConfigIssue(`${sat}/type`, `type must be one of ${STEP_TYPES.join(', ')}`);
    const type = STEP_TYPES_BY_TYPE[step.type];
    if (type.parks === true && place.inItem)
      throw new ConfigIssue(`${sat}/type`, `a ${step.type} step cannot be inside a for_each in this release (an item cannot wait)`);
    if (type.parks === true && place.inOnFailure)
      throw new ConfigIssue(`${sat}/type`, `a ${step.type} step cannot be an on_failure step (a failed run does not wait)`);
    const config = step.config ?? {};
    if (!isObject(config)) throw new ConfigIssue(`${sat}/config`, 'config must be an object');
    const read = readStep(step.key, step.type, config, `${sat}/config`);
    for (const list of stepTypeOf(read)!.describe(read.config).lists ?? []) {
      const lat = `${sat}/config/${list.pointer}`;
      if (place.depth + 1 > WORKFLOW_LIMITS.maxDepth)
        throw new ConfigIssue(lat, `steps may nest at most ${WORKFLOW_LIMITS.maxDepth} deep (the workflow's own steps are at depth 1)`);
      // The step type gave its lists as given; they are replaced, in place, by the steps as read.
      const steps = readList(list.steps, lat, list.pointer.split('/').at(-1)!, tree, {
        depth: place.depth + 1,
        inItem: place.inItem || list.kind === 'item',
        inOnFailure: place.inOnFailure,
      });
      list.steps.splice(0, list.steps.length, ...steps);
    }
    return read;
  });
}

/**
 * A step reads only the outputs of the steps that ran before it on every path: the earlier
 * steps of its list and of the lists holding it, a switch or for_each itself after it ran
 * (not the steps inside it); anything else may be undefined at run time.
 */
function checkRefs(steps: readonly WorkflowStep[], at: string, visible: readonly string[], all: Tree['keys']): void {
  const before = [...visible];
  steps.forEach((step, i) => {
    const described = stepTypeOf(step)!.describe(step.config);
    for (const [pointer, text] of described.expressions) {
      const problem = stepRefProblem(text, before, step.key, all);
      if (problem !== undefined) throw new ConfigIssue(`${at}/${i}/config/${pointer}`, problem);
    }
    for (const list of described.lists ?? []) checkRefs(list.steps, `${at}/${i}/config/${list.pointer}`, before, all);
    before.push(step.key);
  });
}

function readSteps(stepParams: unknown, onFailureParams: unknown): { steps: WorkflowStep[]; onFailure: WorkflowStep[] } {
  const tree: Tree = { keys: new Map(), total: 0 };
  const steps = readList(stepParams, `${AT}/step_params`, 'step_params', tree, { depth: 1, inItem: false, inOnFailure: false });
  const onFailure =
    onFailureParams === undefined || onFailureParams === null
      ? []
      : readList(onFailureParams, `${AT}/on_failure_params`, 'on_failure_params', tree, { depth: 1, inItem: false, inOnFailure: true });
  checkRefs(steps, `${AT}/step_params`, [], tree.keys);
  // on_failure steps may read any of the workflow's own top-level steps: one that did not succeed reads as undefined (documented).
  checkRefs(
    onFailure,
    `${AT}/on_failure_params`,
    steps.map((s) => s.key),
    tree.keys,
  );
  return { steps, onFailure };
}

/** Every step of a tree, nested ones after the step holding them, with its pointer under `at`. */
export function* allSteps(steps: readonly WorkflowStep[], at: string): Generator<[WorkflowStep, string]> {
  for (const [i, step] of steps.entries()) {
    yield [step, `${at}/${i}`];
    for (const list of stepTypeOf(step)?.describe(step.config).lists ?? []) yield* allSteps(list.steps, `${at}/${i}/config/${list.pointer}`);
  }
}

const TRIGGER_MEMBERS = {
  webhook: ['key', 'type', 'service_account_id', 'inbound_connector_id', 'accept', 'id'],
  schedule: ['key', 'type', 'cron', 'timezone', 'catch_up', 'id'],
} as const;

function readSchedule(t: Record<string, unknown>, tat: string): { cron: string; timezone: string; catch_up: CatchUp } {
  const cron = text(t, 'cron', tat, { required: true, max: 200 })!.trim();
  const timezone = text(t, 'timezone', tat, { required: false, max: 100 }) ?? DEFAULT_TIMEZONE;
  const catchUp = t.catch_up ?? DEFAULT_CATCH_UP;
  if (typeof catchUp !== 'string' || !(CATCH_UP as readonly string[]).includes(catchUp))
    throw new ConfigIssue(`${tat}/catch_up`, `catch_up must be one of ${CATCH_UP.join(', ')}`);
  const problem = scheduleProblem({ cron, timezone });
  if (problem !== undefined) throw new ConfigIssue(`${tat}/${problem.startsWith('timezone') ? 'timezone' : 'cron'}`, problem);
  return { cron, timezone, catch_up: catchUp as CatchUp };
}

function readTriggers(v: unknown): TriggerInput[] {
  const at = `${AT}/trigger_params`;
  if (!Array.isArray(v)) throw new ConfigIssue(at, 'trigger_params must be an array');
  if (v.length > WORKFLOW_LIMITS.maxTriggers) throw new ConfigIssue(at, `trigger_params may hold at most ${WORKFLOW_LIMITS.maxTriggers} triggers`);
  const keys = new Set<string>();
  const ids = new Set<string>();
  return v.map((t, index): TriggerInput => {
    const tat = `${at}/${index}`;
    if (!isObject(t))
      throw new ConfigIssue(tat, 'a trigger must be an object {key, type: "webhook", service_account_id, ...} or {key, type: "schedule", cron, ...}');
    if (typeof t.type !== 'string' || !(TRIGGER_TYPES as readonly string[]).includes(t.type))
      throw new ConfigIssue(`${tat}/type`, `type must be one of ${TRIGGER_TYPES.join(', ')}`);
    const type = t.type as (typeof TRIGGER_TYPES)[number];
    onlyMembers(t, TRIGGER_MEMBERS[type], tat, `a ${type} trigger`);
    if (typeof t.key !== 'string' || !KEY_RE.test(t.key)) throw new ConfigIssue(`${tat}/key`, `key ${KEY_TEXT}`);
    if (keys.has(t.key)) throw new ConfigIssue(`${tat}/key`, `key ${quoteName(t.key)} is used by an earlier trigger`);
    keys.add(t.key);
    const id = t.id ?? null;
    if (id !== null && !isUuid(id)) throw new ConfigIssue(`${tat}/id`, 'id must be the id of a trigger of this workflow');
    if (id !== null) {
      if (ids.has(id.toLowerCase())) throw new ConfigIssue(`${tat}/id`, 'id is given to an earlier trigger');
      ids.add(id.toLowerCase());
    }
    const common = { index, id: id === null ? null : id.toLowerCase(), key: t.key };
    if (type === 'schedule') return { ...common, type, ...readSchedule(t, tat) };
    if (!isUuid(t.service_account_id)) throw new ConfigIssue(`${tat}/service_account_id`, 'service_account_id must be the id of a service account');
    const connector = t.inbound_connector_id ?? null;
    if (connector !== null && !isUuid(connector))
      throw new ConfigIssue(`${tat}/inbound_connector_id`, 'inbound_connector_id must be the id of an inbound connector or null');
    const accept = t.accept ?? DEFAULT_WEBHOOK_ACCEPT;
    if (typeof accept !== 'string' || !(WEBHOOK_ACCEPT as readonly string[]).includes(accept))
      throw new ConfigIssue(`${tat}/accept`, `accept must be one of ${WEBHOOK_ACCEPT.join(', ')} (form also takes application/x-www-form-urlencoded bodies)`);
    return {
      ...common,
      type,
      service_account_id: (t.service_account_id as string).toLowerCase(),
      inbound_connector_id: connector === null ? null : (connector as string).toLowerCase(),
      accept: accept as WebhookAccept,
    };
  });
}

/** A wait_for_delivery waits on a webhook trigger of its own workflow: a schedule has no deliveries, another workflow's trigger never resumes it. */
function checkWaitTriggers({ steps, triggers }: Pick<Definition, 'steps' | 'triggers'>): void {
  for (const [step, at] of allSteps(steps, `${AT}/step_params`)) {
    if (step.type !== 'wait_for_delivery') continue;
    const trigger = triggers.find((t) => t.key === step.config.trigger);
    if (trigger?.type !== 'webhook') {
      const webhooks = triggers.filter((t) => t.type === 'webhook').map((t) => t.key);
      throw new ConfigIssue(
        `${at}/config/trigger`,
        `trigger must be the key of a webhook trigger of this workflow (${webhooks.length === 0 ? 'it has none' : `its webhook triggers: ${webhooks.join(', ')}`})`,
      );
    }
  }
}

export function readDefinition(attrs: Record<string, unknown>): Definition {
  try {
    const wf = readWfParams(attrs.wf_params);
    const { steps, onFailure } = readSteps(attrs.step_params, attrs.on_failure_params);
    const definition = { wf, steps, onFailure, triggers: readTriggers(attrs.trigger_params) };
    checkWaitTriggers(definition);
    return definition;
  } catch (err) {
    // The first problem, as the contract's error at its pointer.
    if (err instanceof ConfigIssue) throw invalidAt(err.pointer, err.message);
    throw err;
  }
}
