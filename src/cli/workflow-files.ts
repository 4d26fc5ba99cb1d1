/**
 * Workflows and data models as files (YAML or JSON): the builder state with steps and
 * triggers keyed by name, each step's config beside its type. Reading checks the file's
 * shape and names the bad member by its path in the file (`steps.shape.expression`); the
 * server checks the rest, and its pointers are turned back into such paths.
 */
import path from 'node:path';
import YAML from 'yaml';
import { canonicalJson, isObject } from '../json.ts';
import { CommandFailure } from './admin-client.ts';

type Obj = Record<string, unknown>;

/** A member path as a reader of the file writes it: steps.shape.mapping.amount, triggers.shop.cron. */
export function memberPath(parts: ReadonlyArray<string | number>): string {
  return parts
    .map((p, i) => (typeof p === 'number' ? `[${p}]` : /^[A-Za-z_][A-Za-z0-9_-]*$/.test(p) ? `${i === 0 ? '' : '.'}${p}` : `[${JSON.stringify(p)}]`))
    .join('');
}

export class FileError extends CommandFailure {
  constructor(file: string, at: ReadonlyArray<string | number>, problem: string) {
    super(`${file}${at.length > 0 ? ` at ${memberPath(at)}` : ''}: ${problem}`, 'invalid_file');
  }
}

/** The file's document: JSON when it is named .json (or, unnamed, looks like JSON), else YAML. */
export function parseDocumentText(file: string, text: string): unknown {
  const ext = path.extname(file).toLowerCase();
  const asJson = ext === '.json' || (ext !== '.yaml' && ext !== '.yml' && /^\s*[{[]/.test(text));
  if (asJson) {
    try {
      return JSON.parse(text);
    } catch (err) {
      throw new FileError(file, [], `not valid JSON (${(err as Error).message})`);
    }
  }
  const doc = YAML.parseDocument(text, { prettyErrors: true, uniqueKeys: true });
  const first = doc.errors[0];
  if (first) {
    const pos = first.linePos?.[0];
    const what = first.message.split('\n')[0]!.replace(/ at line \d+, column \d+:?$/, '');
    throw new FileError(file, [], `not valid YAML${pos ? ` (line ${pos.line}, column ${pos.col})` : ''}: ${what}`);
  }
  return doc.toJS({ maxAliasCount: 100 });
}

function only(file: string, obj: Obj, allowed: readonly string[], at: Array<string | number>, what: string): void {
  for (const k of Object.keys(obj)) {
    if (!allowed.includes(k)) throw new FileError(file, [...at, k], `${JSON.stringify(k)} is not a member of ${what} (allowed: ${allowed.join(', ')})`);
  }
}

/**
 * A map keyed by name, or a list of objects with `key` (or `name` for fields): the entries in
 * order, each with its name.
 */
function entries(file: string, v: unknown, at: string, nameMember: 'key' | 'name'): Array<[string, Obj, Array<string | number>]> {
  if (v === undefined || v === null) return [];
  if (Array.isArray(v)) {
    return v.map((item, i) => {
      if (!isObject(item)) throw new FileError(file, [at, i], `must be an object with ${nameMember} and type`);
      const name = item[nameMember];
      if (typeof name !== 'string' || name === '') throw new FileError(file, [at, i, nameMember], `${nameMember} must be a name`);
      const { [nameMember]: _name, ...rest } = item;
      return [name, rest, [at, name]];
    });
  }
  if (!isObject(v)) throw new FileError(file, [at], `must be a map of name: {type, ...} (or a list)`);
  return Object.entries(v).map(([name, item]) => {
    if (!isObject(item)) throw new FileError(file, [at, name], 'must be an object {type, ...}');
    return [name, item, [at, name]];
  });
}

// ---------------------------------------------------------------- workflows

export interface WorkflowFile {
  name: string;
  description: string | null;
  is_active: boolean;
  lock_version: string | null;
  steps: Array<{ key: string; type: string; config: Obj }>;
  /** Run once when a run fails for good (the file's `on_failure:`, shaped as `steps:`). */
  on_failure: Array<{ key: string; type: string; config: Obj }>;
  /** Webhooks without service_account_id take the applying account's. */
  triggers: Array<{ key: string; type: string; members: Obj }>;
}

export const WORKFLOW_FILE_MEMBERS = ['name', 'description', 'is_active', 'lock_version', 'triggers', 'steps', 'on_failure'] as const;

type FileStep = { key: string; type: string; config: Obj };

/**
 * Where a step's config holds steps (a switch's branches, a for_each's steps), as paths of
 * members: a file writes each as a map of key: {type, ...}, as `steps:` (a list of {key, ...} is read too).
 */
function nestedLists(type: string, config: Obj): Array<Array<string | number>> {
  if (type === 'switch') {
    const cases = Array.isArray(config.cases) ? config.cases : [];
    return [...cases.map((_, i) => ['cases', i, 'steps']), ...(config.default === undefined ? [] : [['default']])];
  }
  if (type === 'for_each') return [['steps']];
  return [];
}

function getAt(o: unknown, path: ReadonlyArray<string | number>): unknown {
  let v = o;
  for (const p of path) v = isObject(v) || Array.isArray(v) ? (v as Record<string | number, unknown>)[p] : undefined;
  return v;
}

/** A copy of `config` with the lists at `paths` replaced by `f` of each. */
function mapLists(type: string, config: Obj, f: (v: unknown, path: Array<string | number>) => unknown): Obj {
  const out = structuredClone(config);
  for (const path of nestedLists(type, config)) {
    const parent = getAt(out, path.slice(0, -1)) as Record<string | number, unknown> | undefined;
    if (parent === undefined || parent === null || typeof parent !== 'object') continue;
    const last = path.at(-1)!;
    if (parent[last] === undefined) continue;
    parent[last] = f(parent[last], path);
  }
  return out;
}

/** A list of steps as the file has it (a map of key: {type, ...}, or a list of {key, type, ...}), in the API's terms. */
function stepsOfFile(file: string, v: unknown, at: Array<string | number>): FileStep[] {
  const items: Array<[string, Obj, Array<string | number>]> = Array.isArray(v)
    ? v.map((item, i) => {
        if (!isObject(item)) throw new FileError(file, [...at, i], 'must be an object with key and type');
        const { key, ...rest } = item;
        if (typeof key !== 'string' || key === '') throw new FileError(file, [...at, i, 'key'], 'key must be a name');
        return [key, rest, [...at, key]];
      })
    : isObject(v)
      ? Object.entries(v).map(([key, item]) => {
          if (!isObject(item)) throw new FileError(file, [...at, key], 'must be an object {type, ...}');
          return [key, item, [...at, key]];
        })
      : (() => {
          throw new FileError(file, at, 'must be a map of key: {type, ...} (or a list)');
        })();
  return items.map(([key, item, sat]) => {
    if (typeof item.type !== 'string') throw new FileError(file, [...sat, 'type'], `type is required: ${STEP_TYPE_NAMES}`);
    const { type, ...config } = item;
    const nested = mapLists(type, withoutNulls(config), (list, path) => stepsOfFile(file, list, [...sat, ...path]));
    return { key, type, config: nested };
  });
}

const STEP_TYPE_NAMES = 'transform, condition, write_fact, http_request, switch or for_each';

/** A list of steps in the file's terms: a map of key: {type, ...}, nested lists alike. */
function stepsToFile(steps: readonly FileStep[]): Obj {
  return Object.fromEntries(
    steps.map((s) => [
      s.key,
      inFileOrder({ type: s.type, ...mapLists(s.type, s.config, (list) => stepsToFile(Array.isArray(list) ? (list as FileStep[]) : [])) }),
    ]),
  );
}

/** The API's stored steps, nulls dropped at every depth. */
function storedSteps(v: unknown): FileStep[] {
  return (Array.isArray(v) ? v : []).map((s: FileStep) => ({
    key: s.key,
    type: s.type,
    config: mapLists(s.type, withoutNulls(s.config ?? {}), (list) => storedSteps(list)),
  }));
}

/** Drops members whose value is null: the server stores a config without them. */
function withoutNulls(o: Obj): Obj {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== null && v !== undefined));
}

export function readWorkflowFile(file: string, doc: unknown): WorkflowFile {
  if (!isObject(doc)) throw new FileError(file, [], 'must be a map with name, steps and triggers');
  only(file, doc, WORKFLOW_FILE_MEMBERS, [], 'a workflow file');
  if (typeof doc.name !== 'string' || doc.name.trim() === '') throw new FileError(file, ['name'], 'name is required (a string)');
  if (doc.description !== undefined && doc.description !== null && typeof doc.description !== 'string')
    throw new FileError(file, ['description'], 'description must be a string');
  if (doc.is_active !== undefined && typeof doc.is_active !== 'boolean') throw new FileError(file, ['is_active'], 'is_active must be true or false');
  if (doc.lock_version !== undefined && doc.lock_version !== null && typeof doc.lock_version !== 'string')
    throw new FileError(file, ['lock_version'], 'lock_version must be the string `tributary workflow get --yaml` wrote');
  const steps = stepsOfFile(file, doc.steps, ['steps']);
  const onFailure = doc.on_failure === undefined || doc.on_failure === null ? [] : stepsOfFile(file, doc.on_failure, ['on_failure']);
  if (steps.length === 0) throw new FileError(file, ['steps'], 'steps must name at least one step');
  const triggers = entries(file, doc.triggers, 'triggers', 'key').map(([key, item, at]) => {
    if (typeof item.type !== 'string') throw new FileError(file, [...at, 'type'], 'type is required: webhook or schedule');
    const { type, ...members } = item;
    return { key, type, members: withoutNulls(members) };
  });
  return {
    name: doc.name.trim(),
    description: (doc.description as string | null | undefined) ?? null,
    is_active: (doc.is_active as boolean | undefined) ?? true,
    lock_version: (doc.lock_version as string | null | undefined) ?? null,
    steps,
    on_failure: onFailure,
    triggers,
  };
}

/** What the server stores for a trigger, as the file would have it: defaults filled in, ids lowercased. */
function normalTrigger(t: { key: string; type: string; members: Obj }): Obj {
  const m = t.members;
  const lower = (v: unknown) => (typeof v === 'string' ? v.toLowerCase() : (v ?? null));
  if (t.type === 'schedule')
    return {
      key: t.key,
      type: t.type,
      cron: typeof m.cron === 'string' ? m.cron.trim() : m.cron,
      timezone: m.timezone ?? 'UTC',
      catch_up: m.catch_up ?? 'latest',
    };
  return {
    key: t.key,
    type: t.type,
    service_account_id: lower(m.service_account_id),
    inbound_connector_id: lower(m.inbound_connector_id),
    accept: m.accept ?? 'json',
  };
}

function normalStep(s: FileStep): Obj {
  const c = mapLists(s.type, s.config, (list) => (Array.isArray(list) ? (list as FileStep[]).map(normalStep) : list));
  if (s.type === 'switch' && c.default === undefined) c.default = [];
  if (s.type === 'for_each' && c.concurrency === undefined) c.concurrency = 1;
  if (s.type === 'http_request') {
    if (typeof c.method === 'string') c.method = c.method.toUpperCase();
    if (typeof c.connector_id === 'string') c.connector_id = c.connector_id.toLowerCase();
  }
  return { key: s.key, type: s.type, config: c };
}

/** The current workflow resource's attributes in the file's terms. */
export function workflowOfResource(attrs: Obj): WorkflowFile {
  const triggers = (Array.isArray(attrs.triggers) ? attrs.triggers : []) as Obj[];
  return {
    name: String(attrs.name),
    description: (attrs.description as string | null) ?? null,
    is_active: attrs.is_active === true,
    lock_version: (attrs.lock_version as string | null) ?? null,
    steps: storedSteps(attrs.steps),
    on_failure: storedSteps(attrs.on_failure),
    triggers: triggers.map((t) => {
      const { id: _id, key, type, next_fire_at: _next, ...members } = t;
      return { key: String(key), type: String(type), members: withoutNulls(members) };
    }),
  };
}

/** Whether the steps differ (a new version) and whether anything differs (a save at all). */
export function compareWorkflows(wanted: WorkflowFile, current: WorkflowFile): { stepsDiffer: boolean; anyDiffers: boolean } {
  const steps = (w: WorkflowFile) => canonicalJson({ steps: w.steps.map(normalStep), on_failure: w.on_failure.map(normalStep) });
  const stepsDiffer = steps(wanted) !== steps(current);
  const rest = (w: WorkflowFile) =>
    canonicalJson({ name: w.name, description: w.description, is_active: w.is_active, triggers: w.triggers.map(normalTrigger) });
  return { stepsDiffer, anyDiffers: stepsDiffer || rest(wanted) !== rest(current) };
}

/**
 * The file of a workflow: what `get --yaml` writes. A webhook run by `ownAccount` leaves out
 * service_account_id, so the file applies unchanged with another environment's account.
 */
/**
 * The members of a step's config and of a trigger in the order the file format shows them
 * (docs/cli.md): the server keeps them as jsonb, which orders an object's keys by length, so
 * `get` puts them back in this order (members it does not know last, as they came).
 */
const MEMBER_ORDER = [
  'type',
  'expression',
  'data_model_slug',
  'mapping',
  'data',
  'observed_at',
  'for_each',
  'items',
  'concurrency',
  'cases',
  'when',
  'steps',
  'default',
  'connector_id',
  'operation_ref',
  'method',
  'path',
  'params',
  'query',
  'headers',
  'body',
  'paginate',
  'value',
  'service_account_id',
  'inbound_connector_id',
  'accept',
  'cron',
  'timezone',
  'catch_up',
];

function inFileOrder(members: Obj): Obj {
  const rank = (k: string) => (MEMBER_ORDER.includes(k) ? MEMBER_ORDER.indexOf(k) : MEMBER_ORDER.length);
  return Object.fromEntries(Object.entries(members).sort(([a], [b]) => rank(a) - rank(b)));
}

export function workflowFileDocument(w: WorkflowFile, ownAccount: string | undefined): Obj {
  const doc: Obj = { name: w.name };
  if (w.description !== null) doc.description = w.description;
  doc.is_active = w.is_active;
  if (w.lock_version !== null) doc.lock_version = w.lock_version;
  doc.triggers = Object.fromEntries(
    w.triggers.map((t) => {
      const m = { ...t.members };
      if (t.type === 'webhook' && ownAccount !== undefined && String(m.service_account_id).toLowerCase() === ownAccount.toLowerCase())
        delete m.service_account_id;
      // The default goes without saying, so files written before `accept` existed read the same.
      if (t.type === 'webhook' && m.accept === 'json') delete m.accept;
      return [t.key, inFileOrder({ type: t.type, ...m })];
    }),
  );
  doc.steps = stepsToFile(w.steps);
  if (w.on_failure.length > 0) doc.on_failure = stepsToFile(w.on_failure);
  return doc;
}

export function renderYaml(doc: unknown, header?: string): string {
  const body = YAML.stringify(doc, { lineWidth: 0, aliasDuplicateObjects: false });
  return header ? `${header}\n${body}` : body;
}

/**
 * A pointer of the server's answer to a save (`/data/attributes/step_params/0/config/mapping/amount`)
 * as the file's path (`steps.store.mapping.amount`); undefined when it points elsewhere.
 */
export function fileMemberOfPointer(pointer: string, w: WorkflowFile): string | undefined {
  const parts = pointer
    .split('/')
    .slice(1)
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
  if (parts[0] !== 'data' || parts[1] !== 'attributes') return undefined;
  const [member, index, ...rest] = parts.slice(2);
  if (member === 'wf_params') return memberPath(index === undefined ? [] : [index]) || undefined;
  if (member === 'lock_version') return 'lock_version';
  const i = Number(index);
  if (member === 'step_params' && w.steps[i]) return memberPath(['steps', ...stepPath(w.steps[i]!, rest)]);
  if (member === 'on_failure_params' && w.on_failure[i]) return memberPath(['on_failure', ...stepPath(w.on_failure[i]!, rest)]);
  if (member === 'trigger_params' && w.triggers[i]) return memberPath(['triggers', w.triggers[i]!.key, ...(rest[0] === 'key' ? [] : rest)]);
  return undefined;
}

/** The path in the file of a pointer's rest under one step (`config/cases/0/steps/1/config/expression`): nested steps by key. */
function stepPath(step: FileStep, rest: string[]): Array<string | number> {
  if (rest[0] !== 'config') return rest[0] === 'key' ? [step.key] : [step.key, ...rest];
  const tail = rest.slice(1);
  for (const path of nestedLists(step.type, step.config)) {
    const names = path.map(String);
    if (names.every((p, k) => tail[k] === p) && tail.length > names.length) {
      const list = getAt(step.config, path);
      const inner = Array.isArray(list) ? (list as FileStep[])[Number(tail[names.length])] : undefined;
      if (inner) return [step.key, ...path, ...stepPath(inner, tail.slice(names.length + 1))];
    }
  }
  return [step.key, ...tail];
}

// ---------------------------------------------------------------- data models

export const FIELD_MEMBERS = ['label', 'description', 'type', 'is_primary_key', 'is_required', 'is_indexed', 'constraints'] as const;

export interface DataModelFile {
  slug: string;
  /** The model's attributes as the server should hold them. */
  attributes: { name: string; description: string | null; retention_days: number | null };
  fields: Array<{ name: string; attributes: Obj; at: Array<string | number> }>;
}

export function readDataModelFile(file: string, doc: unknown): DataModelFile {
  if (!isObject(doc)) throw new FileError(file, [], 'must be a map with slug, name and fields');
  only(file, doc, ['slug', 'name', 'description', 'retention_days', 'fields'], [], 'a data model file');
  if (typeof doc.slug !== 'string' || doc.slug === '') throw new FileError(file, ['slug'], 'slug is required (lowercase letters, digits or hyphens)');
  if (doc.name !== undefined && typeof doc.name !== 'string') throw new FileError(file, ['name'], 'name must be a string');
  if (doc.description !== undefined && doc.description !== null && typeof doc.description !== 'string')
    throw new FileError(file, ['description'], 'description must be a string');
  if (doc.retention_days !== undefined && doc.retention_days !== null && !Number.isInteger(doc.retention_days))
    throw new FileError(file, ['retention_days'], 'retention_days must be a whole number of days');
  const fields = entries(file, doc.fields, 'fields', 'name').map(([name, item, at]) => {
    only(file, item, FIELD_MEMBERS, at, 'a field');
    return {
      name,
      at,
      attributes: {
        label: item.label ?? name,
        description: item.description ?? null,
        type: item.type ?? null,
        is_primary_key: item.is_primary_key ?? false,
        is_required: item.is_required ?? false,
        is_indexed: item.is_indexed ?? false,
        constraints: item.constraints ?? null,
      },
    };
  });
  return {
    slug: doc.slug,
    attributes: {
      name: (doc.name as string | undefined) ?? doc.slug,
      description: (doc.description as string | null | undefined) ?? null,
      retention_days: (doc.retention_days as number | null | undefined) ?? null,
    },
    fields,
  };
}

/** The members of `wanted` whose value differs from `current`'s. */
export function changedMembers(wanted: Obj, current: Obj): Obj {
  return Object.fromEntries(Object.entries(wanted).filter(([k, v]) => canonicalJson(v ?? null) !== canonicalJson(current[k] ?? null)));
}
