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
  /** {key, limit}, or null: no limit (docs/workflows.md, "Concurrency"). */
  concurrency: Obj | null;
  steps: Array<{ key: string; type: string; config: Obj }>;
  /** Webhooks without service_account_id take the applying account's. */
  triggers: Array<{ key: string; type: string; members: Obj }>;
}

export const WORKFLOW_FILE_MEMBERS = ['name', 'description', 'is_active', 'lock_version', 'concurrency', 'triggers', 'steps'] as const;

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
  // Its members are the server's to check (wf_params.concurrency); the pointers come back as concurrency.key, concurrency.limit.
  if (doc.concurrency !== undefined && doc.concurrency !== null && !isObject(doc.concurrency))
    throw new FileError(file, ['concurrency'], 'concurrency must be a map {key, limit} (or null)');
  const steps = entries(file, doc.steps, 'steps', 'key').map(([key, item, at]) => {
    if (typeof item.type !== 'string') throw new FileError(file, [...at, 'type'], 'type is required: transform, condition, write_fact or http_request');
    const { type, ...config } = item;
    return { key, type, config: withoutNulls(config) };
  });
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
    concurrency: (doc.concurrency as Obj | null | undefined) ?? null,
    steps,
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

function normalStep(s: { key: string; type: string; config: Obj }): Obj {
  const c = { ...s.config };
  if (s.type === 'http_request') {
    if (typeof c.method === 'string') c.method = c.method.toUpperCase();
    if (typeof c.connector_id === 'string') c.connector_id = c.connector_id.toLowerCase();
  }
  return { key: s.key, type: s.type, config: c };
}

/** The current workflow resource's attributes in the file's terms. */
export function workflowOfResource(attrs: Obj): WorkflowFile {
  const steps = (Array.isArray(attrs.steps) ? attrs.steps : []) as Array<{ key: string; type: string; config: Obj }>;
  const triggers = (Array.isArray(attrs.triggers) ? attrs.triggers : []) as Obj[];
  return {
    name: String(attrs.name),
    description: (attrs.description as string | null) ?? null,
    is_active: attrs.is_active === true,
    lock_version: (attrs.lock_version as string | null) ?? null,
    concurrency: isObject(attrs.concurrency) ? attrs.concurrency : null,
    steps: steps.map((s) => ({ key: s.key, type: s.type, config: withoutNulls(s.config ?? {}) })),
    triggers: triggers.map((t) => {
      const { id: _id, key, type, next_fire_at: _next, ...members } = t;
      return { key: String(key), type: String(type), members: withoutNulls(members) };
    }),
  };
}

/** Whether the steps differ (a new version) and whether anything differs (a save at all). */
export function compareWorkflows(wanted: WorkflowFile, current: WorkflowFile): { stepsDiffer: boolean; anyDiffers: boolean } {
  // A version keeps its concurrency as it keeps its steps: a change of it is a new version too.
  const stepsDiffer =
    canonicalJson(wanted.steps.map(normalStep)) !== canonicalJson(current.steps.map(normalStep)) ||
    canonicalJson(wanted.concurrency) !== canonicalJson(current.concurrency);
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
  'connector_id',
  'operation_ref',
  'method',
  'path',
  'params',
  'query',
  'headers',
  'body',
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
  if (w.concurrency !== null) doc.concurrency = { key: w.concurrency.key, limit: w.concurrency.limit };
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
  doc.steps = Object.fromEntries(w.steps.map((s) => [s.key, inFileOrder({ type: s.type, ...s.config })]));
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
  if (member === 'wf_params') return memberPath(index === undefined ? [] : [index, ...rest]) || undefined;
  if (member === 'lock_version') return 'lock_version';
  const i = Number(index);
  if (member === 'step_params' && w.steps[i]) {
    const tail = rest[0] === 'config' ? rest.slice(1) : rest[0] === 'key' ? [] : rest;
    return memberPath(['steps', w.steps[i]!.key, ...tail]);
  }
  if (member === 'trigger_params' && w.triggers[i]) return memberPath(['triggers', w.triggers[i]!.key, ...(rest[0] === 'key' ? [] : rest)]);
  return undefined;
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
