/**
 * The builder state's inner structure (docs/workflows.md): wf_params, step_params and
 * trigger_params, checked member by member with a pointer into the request document, so a
 * client can show the error beside the input that caused it. Only the shape and the
 * expressions are checked here; what needs the database (slugs, accounts, connectors,
 * trigger ids) is checked by save.ts inside its transaction.
 */
import { invalidAt, quoteName } from '../errors.ts';
import { isObject, pointerToken } from '../json.ts';
import type { HttpRequestConfig, WebhookAccept, WorkflowStep, WriteFactConfig } from '../db/tables.ts';
import { isUuid } from '../ids.ts';
import { SLUG_RE } from '../input.ts';
import { compileExpression } from '../expressions/expressions.ts';
import { stepRefProblem } from './step-refs.ts';
import { CATCH_UP, DEFAULT_CATCH_UP, DEFAULT_TIMEZONE, scheduleProblem, type CatchUp } from '../triggers/schedule.ts';

export const WORKFLOW_LIMITS = {
  maxSteps: 50,
  maxTriggers: 20,
  maxMappingFields: 200,
} as const;

export const STEP_TYPES = ['transform', 'condition', 'write_fact', 'http_request'] as const;
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
  triggers: TriggerInput[];
}

function onlyMembers(obj: Record<string, unknown>, allowed: readonly string[], at: string, what: string): void {
  for (const k of Object.keys(obj)) {
    if (!allowed.includes(k)) throw invalidAt(`${at}/${k}`, `${quoteName(k)} is not a member of ${what} (allowed: ${allowed.join(', ')})`);
  }
}

function text(obj: Record<string, unknown>, name: string, at: string, opts: { required: boolean; max: number }): string | null {
  const v = obj[name];
  if (v === undefined || v === null) {
    if (opts.required) throw invalidAt(`${at}/${name}`, `${name} is required`);
    return null;
  }
  if (typeof v !== 'string' || !v.isWellFormed() || v.includes('\0')) throw invalidAt(`${at}/${name}`, `${name} must be a string`);
  if (opts.required && v.trim() === '') throw invalidAt(`${at}/${name}`, `${name} must not be empty`);
  if (v.length > opts.max) throw invalidAt(`${at}/${name}`, `${name} must be at most ${opts.max} characters`);
  return v;
}

function expression(obj: Record<string, unknown>, name: string, at: string, required: boolean): string | null {
  const v = obj[name];
  if (v === undefined || v === null) {
    if (required) throw invalidAt(`${at}/${name}`, `${name} is required (a JSONata expression)`);
    return null;
  }
  if (typeof v !== 'string') throw invalidAt(`${at}/${name}`, `${name} must be a JSONata expression (a string)`);
  const r = compileExpression(v);
  if (!r.ok) throw invalidAt(`${at}/${name}`, `${name} ${r.reason}`);
  return v;
}

function readWfParams(v: unknown): WfParams {
  const at = `${AT}/wf_params`;
  if (!isObject(v)) throw invalidAt(at, 'wf_params must be an object');
  onlyMembers(v, ['name', 'description', 'is_active'], at, 'wf_params');
  const name = text(v, 'name', at, { required: true, max: 200 })!;
  const description = text(v, 'description', at, { required: false, max: 4000 });
  const active = v.is_active;
  if (active !== undefined && typeof active !== 'boolean') throw invalidAt(`${at}/is_active`, 'is_active must be true or false');
  return { name: name.trim(), description, is_active: active ?? true };
}

const isStepType = (t: unknown): t is WorkflowStep['type'] => (STEP_TYPES as readonly unknown[]).includes(t);

function readStep(key: string, type: WorkflowStep['type'], config: Record<string, unknown>, at: string): WorkflowStep {
  switch (type) {
    case 'transform':
    case 'condition':
      onlyMembers(config, ['expression'], at, `a ${type} step's config`);
      return { key, type, config: { expression: expression(config, 'expression', at, true)! } };
    case 'write_fact':
      return { key, type, config: readWriteFact(config, at) };
    case 'http_request':
      return { key, type, config: readHttpRequest(config, at) };
  }
}

function readWriteFact(config: Record<string, unknown>, at: string): WriteFactConfig {
  onlyMembers(config, ['data_model_slug', 'mapping', 'data', 'observed_at', 'for_each'], at, "a write_fact step's config");
  const slug = config.data_model_slug;
  if (typeof slug !== 'string' || !SLUG_RE.test(slug)) throw invalidAt(`${at}/data_model_slug`, 'data_model_slug must be the slug of a data model');
  const out: WriteFactConfig = { data_model_slug: slug };
  const hasMapping = config.mapping !== undefined && config.mapping !== null;
  const hasData = config.data !== undefined && config.data !== null;
  if (hasMapping === hasData) throw invalidAt(at, 'a write_fact step needs exactly one of mapping (an object of field: expression) and data (an expression)');
  if (hasMapping) {
    if (!isObject(config.mapping)) throw invalidAt(`${at}/mapping`, 'mapping must be an object of field: expression');
    const entries = Object.entries(config.mapping);
    if (entries.length === 0) throw invalidAt(`${at}/mapping`, 'mapping must name at least one field');
    if (entries.length > WORKFLOW_LIMITS.maxMappingFields)
      throw invalidAt(`${at}/mapping`, `mapping may name at most ${WORKFLOW_LIMITS.maxMappingFields} fields`);
    const mapping: Record<string, string> = {};
    for (const [field] of entries) mapping[field] = expression(config.mapping, field, `${at}/mapping`, true)!;
    out.mapping = mapping;
  } else {
    out.data = expression(config, 'data', at, true)!;
  }
  const observedAt = expression(config, 'observed_at', at, false);
  if (observedAt !== null) out.observed_at = observedAt;
  const forEach = expression(config, 'for_each', at, false);
  if (forEach !== null) out.for_each = forEach;
  return out;
}

export const HTTP_METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'] as const;
/** An HTTP header name (RFC 9110 token). */
const HEADER_NAME = /^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$/;
/** Set by the connector or the transport, never by a step. */
const RESERVED_HEADERS = new Set([
  'host',
  'content-length',
  'transfer-encoding',
  'connection',
  'authorization',
  'cookie',
  'te',
  'upgrade',
  'proxy-authorization',
  'webhook-id',
  'webhook-timestamp',
  'webhook-signature',
]);
export const PATH_PARAM = /\{([A-Za-z0-9_.-]{1,64})\}/g;

function expressionMap(config: Record<string, unknown>, name: string, at: string, headers = false): Record<string, string> | undefined {
  const v = config[name];
  if (v === undefined || v === null) return undefined;
  if (!isObject(v)) throw invalidAt(`${at}/${name}`, `${name} must be an object of name: expression`);
  const entries = Object.keys(v);
  if (entries.length > WORKFLOW_LIMITS.maxMappingFields)
    throw invalidAt(`${at}/${name}`, `${name} may name at most ${WORKFLOW_LIMITS.maxMappingFields} members`);
  const out: Record<string, string> = {};
  for (const k of entries) {
    const kat = `${at}/${name}/${pointerToken(k)}`;
    if (k === '' || k.length > 128) throw invalidAt(kat, `a name in ${name} must be 1-128 characters`);
    if (headers && (!HEADER_NAME.test(k) || RESERVED_HEADERS.has(k.toLowerCase()))) {
      throw invalidAt(kat, `${quoteName(k)} cannot be set by a step (an HTTP header name other than ${[...RESERVED_HEADERS].join(', ')})`);
    }
    out[k] = expression(v, k, `${at}/${name}`, true)!;
  }
  return out;
}

/**
 * http_request: {connector_id, operation_ref | method + path, params?, query?, headers?,
 * body?}. params, query and headers are objects of name: expression; body one expression.
 * With operation_ref, params go where the operation declares them (path, query, header);
 * with method + path, params fill the path's {name} placeholders.
 */
function readHttpRequest(config: Record<string, unknown>, at: string): HttpRequestConfig {
  onlyMembers(config, ['connector_id', 'operation_ref', 'method', 'path', 'params', 'query', 'headers', 'body'], at, "an http_request step's config");
  if (!isUuid(config.connector_id)) throw invalidAt(`${at}/connector_id`, 'connector_id must be the id of an outbound connector');
  const out: HttpRequestConfig = { connector_id: config.connector_id.toLowerCase() };
  const hasRef = config.operation_ref !== undefined && config.operation_ref !== null;
  const hasPath = config.method !== undefined || config.path !== undefined;
  if (hasRef === hasPath) throw invalidAt(at, 'an http_request step needs either operation_ref or method and path');
  if (hasRef) {
    const ref = text(config, 'operation_ref', at, { required: true, max: 300 })!;
    out.operation_ref = ref;
  } else {
    const method = typeof config.method === 'string' ? config.method.toUpperCase() : undefined;
    if (method === undefined || !(HTTP_METHODS as readonly string[]).includes(method))
      throw invalidAt(`${at}/method`, `method must be one of ${HTTP_METHODS.join(', ')}`);
    const path = text(config, 'path', at, { required: true, max: 2000 })!;
    if (!path.startsWith('/') || path.startsWith('//') || /[\s#]/.test(path))
      throw invalidAt(`${at}/path`, 'path must start with / (one), relative to the connector base URL, without spaces or #');
    out.method = method;
    out.path = path;
  }
  const params = expressionMap(config, 'params', at);
  const query = expressionMap(config, 'query', at);
  const headers = expressionMap(config, 'headers', at, true);
  if (!hasRef) {
    for (const m of out.path!.matchAll(PATH_PARAM)) {
      if (params?.[m[1]!] === undefined) throw invalidAt(`${at}/params`, `the path names {${m[1]}}: params must give it`);
    }
  }
  if (params) out.params = params;
  if (query) out.query = query;
  if (headers) out.headers = headers;
  const body = expression(config, 'body', at, false);
  if (body !== null) out.body = body;
  return out;
}

function readSteps(v: unknown): WorkflowStep[] {
  const at = `${AT}/step_params`;
  if (!Array.isArray(v)) throw invalidAt(at, 'step_params must be an array');
  if (v.length > WORKFLOW_LIMITS.maxSteps) throw invalidAt(at, `step_params may hold at most ${WORKFLOW_LIMITS.maxSteps} steps`);
  const seen = new Set<string>();
  const steps = v.map((step, i) => {
    const sat = `${at}/${i}`;
    if (!isObject(step)) throw invalidAt(sat, 'a step must be an object {key, type, config}');
    onlyMembers(step, ['key', 'type', 'config'], sat, 'a step');
    if (typeof step.key !== 'string' || !KEY_RE.test(step.key)) throw invalidAt(`${sat}/key`, `key ${KEY_TEXT}`);
    if (seen.has(step.key)) throw invalidAt(`${sat}/key`, `key ${quoteName(step.key)} is used by an earlier step`);
    seen.add(step.key);
    if (!isStepType(step.type)) throw invalidAt(`${sat}/type`, `type must be one of ${STEP_TYPES.join(', ')}`);
    const config = step.config ?? {};
    if (!isObject(config)) throw invalidAt(`${sat}/config`, 'config must be an object');
    return readStep(step.key, step.type, config, `${sat}/config`);
  });
  // A step reads only the outputs of the steps before it: anything else is undefined at run time.
  const keys = steps.map((s) => s.key);
  steps.forEach((step, i) => {
    for (const [pointer, text] of expressionsOf(step)) {
      const problem = stepRefProblem(text, keys, i);
      if (problem !== undefined) throw invalidAt(`${at}/${i}/config/${pointer}`, problem);
    }
  });
  return steps;
}

/** A step's expressions with their pointers under its config. */
function expressionsOf(step: WorkflowStep): Array<[string, string]> {
  const members = (name: string, map: Record<string, string> | undefined): Array<[string, string]> =>
    Object.entries(map ?? {}).map(([k, e]) => [`${name}/${pointerToken(k)}`, e]);
  switch (step.type) {
    case 'transform':
    case 'condition':
      return [['expression', step.config.expression]];
    case 'write_fact': {
      const w = step.config;
      const out: Array<[string, string]> = [
        ...(w.for_each === undefined ? [] : [['for_each', w.for_each] as [string, string]]),
        ...members('mapping', w.mapping),
      ];
      if (w.data !== undefined) out.push(['data', w.data]);
      if (w.observed_at !== undefined) out.push(['observed_at', w.observed_at]);
      return out;
    }
    case 'http_request': {
      const h = step.config;
      const out = [...members('params', h.params), ...members('query', h.query), ...members('headers', h.headers)];
      if (h.body !== undefined) out.push(['body', h.body]);
      return out;
    }
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
    throw invalidAt(`${tat}/catch_up`, `catch_up must be one of ${CATCH_UP.join(', ')}`);
  const problem = scheduleProblem({ cron, timezone });
  if (problem !== undefined) throw invalidAt(`${tat}/${problem.startsWith('timezone') ? 'timezone' : 'cron'}`, problem);
  return { cron, timezone, catch_up: catchUp as CatchUp };
}

function readTriggers(v: unknown): TriggerInput[] {
  const at = `${AT}/trigger_params`;
  if (!Array.isArray(v)) throw invalidAt(at, 'trigger_params must be an array');
  if (v.length > WORKFLOW_LIMITS.maxTriggers) throw invalidAt(at, `trigger_params may hold at most ${WORKFLOW_LIMITS.maxTriggers} triggers`);
  const keys = new Set<string>();
  const ids = new Set<string>();
  return v.map((t, index): TriggerInput => {
    const tat = `${at}/${index}`;
    if (!isObject(t)) throw invalidAt(tat, 'a trigger must be an object {key, type: "webhook", service_account_id, ...} or {key, type: "schedule", cron, ...}');
    if (typeof t.type !== 'string' || !(TRIGGER_TYPES as readonly string[]).includes(t.type))
      throw invalidAt(`${tat}/type`, `type must be one of ${TRIGGER_TYPES.join(', ')}`);
    const type = t.type as (typeof TRIGGER_TYPES)[number];
    onlyMembers(t, TRIGGER_MEMBERS[type], tat, `a ${type} trigger`);
    if (typeof t.key !== 'string' || !KEY_RE.test(t.key)) throw invalidAt(`${tat}/key`, `key ${KEY_TEXT}`);
    if (keys.has(t.key)) throw invalidAt(`${tat}/key`, `key ${quoteName(t.key)} is used by an earlier trigger`);
    keys.add(t.key);
    const id = t.id ?? null;
    if (id !== null && !isUuid(id)) throw invalidAt(`${tat}/id`, 'id must be the id of a trigger of this workflow');
    if (id !== null) {
      if (ids.has(id.toLowerCase())) throw invalidAt(`${tat}/id`, 'id is given to an earlier trigger');
      ids.add(id.toLowerCase());
    }
    const common = { index, id: id === null ? null : id.toLowerCase(), key: t.key };
    if (type === 'schedule') return { ...common, type, ...readSchedule(t, tat) };
    if (!isUuid(t.service_account_id)) throw invalidAt(`${tat}/service_account_id`, 'service_account_id must be the id of a service account');
    const connector = t.inbound_connector_id ?? null;
    if (connector !== null && !isUuid(connector))
      throw invalidAt(`${tat}/inbound_connector_id`, 'inbound_connector_id must be the id of an inbound connector or null');
    const accept = t.accept ?? DEFAULT_WEBHOOK_ACCEPT;
    if (typeof accept !== 'string' || !(WEBHOOK_ACCEPT as readonly string[]).includes(accept))
      throw invalidAt(`${tat}/accept`, `accept must be one of ${WEBHOOK_ACCEPT.join(', ')} (form also takes application/x-www-form-urlencoded bodies)`);
    return {
      ...common,
      type,
      service_account_id: (t.service_account_id as string).toLowerCase(),
      inbound_connector_id: connector === null ? null : (connector as string).toLowerCase(),
      accept: accept as WebhookAccept,
    };
  });
}

export function readDefinition(attrs: Record<string, unknown>): Definition {
  return { wf: readWfParams(attrs.wf_params), steps: readSteps(attrs.step_params), triggers: readTriggers(attrs.trigger_params) };
}
