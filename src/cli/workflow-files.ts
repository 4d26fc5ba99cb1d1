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
import {
  fileEntries,
  filePathOfPointer,
  memberPath,
  readWorkflowDocument,
  WORKFLOW_FILE_MEMBERS,
  renderYaml,
  workflowFileDocument,
  workflowOfResource,
  WorkflowFileProblem,
  type WorkflowFile,
} from '../workflows/file.ts';

type Obj = Record<string, unknown>;

export { memberPath };

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

/** A data model file's entries: the workflow file's reading, its problems named with the file. */
function entries(file: string, v: unknown, at: string, nameMember: 'key' | 'name'): Array<[string, Obj, Array<string | number>]> {
  try {
    return fileEntries(v, at, nameMember);
  } catch (err) {
    if (err instanceof WorkflowFileProblem) throw new FileError(file, err.at, err.problem);
    throw err;
  }
}

function only(file: string, obj: Obj, allowed: readonly string[], at: Array<string | number>, what: string): void {
  for (const k of Object.keys(obj)) {
    if (!allowed.includes(k)) throw new FileError(file, [...at, k], `${JSON.stringify(k)} is not a member of ${what} (allowed: ${allowed.join(', ')})`);
  }
}

// ---------------------------------------------------------------- workflows

export type { WorkflowFile };
export { renderYaml, workflowFileDocument, workflowOfResource };
export { WORKFLOW_FILE_MEMBERS };

export function readWorkflowFile(file: string, doc: unknown): WorkflowFile {
  try {
    return readWorkflowDocument(doc);
  } catch (err) {
    if (err instanceof WorkflowFileProblem) throw new FileError(file, err.at, err.problem);
    throw err;
  }
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

/** Where a switch's and a for_each's steps are in their config (the file module's nestedLists, for comparing). */
function normalNested(type: string, c: Obj): void {
  const norm = (list: unknown) => (Array.isArray(list) ? (list as Array<{ key: string; type: string; config: Obj }>).map(normalStep) : list);
  if (type === 'switch') {
    if (Array.isArray(c.cases)) c.cases = (c.cases as Obj[]).map((k) => (isObject(k) ? { ...k, steps: norm(k.steps) } : k));
    c.default = c.default === undefined ? [] : norm(c.default);
  }
  if (type === 'for_each') {
    c.steps = norm(c.steps);
    if (c.concurrency === undefined) c.concurrency = 1;
  }
}

function normalStep(s: { key: string; type: string; config: Obj }): Obj {
  const c = structuredClone(s.config);
  normalNested(s.type, c);
  if (s.type === 'http_request') {
    if (typeof c.method === 'string') c.method = c.method.toUpperCase();
    if (typeof c.connector_id === 'string') c.connector_id = c.connector_id.toLowerCase();
  }
  return { key: s.key, type: s.type, config: c };
}

/** Whether the steps differ (a new version) and whether anything differs (a save at all). */
export function compareWorkflows(wanted: WorkflowFile, current: WorkflowFile): { stepsDiffer: boolean; anyDiffers: boolean } {
  const steps = (w: WorkflowFile) => canonicalJson({ steps: w.steps.map(normalStep), on_failure: w.on_failure.map(normalStep) });
  // A version keeps its concurrency as it keeps its steps: a change of it is a new version too.
  const stepsDiffer = steps(wanted) !== steps(current) || canonicalJson(wanted.concurrency) !== canonicalJson(current.concurrency);
  const rest = (w: WorkflowFile) =>
    canonicalJson({ name: w.name, description: w.description, is_active: w.is_active, triggers: w.triggers.map(normalTrigger) });
  return { stepsDiffer, anyDiffers: stepsDiffer || rest(wanted) !== rest(current) };
}

/**
 * A pointer of the server's answer to a save (`/data/attributes/step_params/0/config/mapping/amount`)
 * as the file's path (`steps.store.mapping.amount`); undefined when it points elsewhere.
 */
export function fileMemberOfPointer(pointer: string, w: WorkflowFile): string | undefined {
  const at = filePathOfPointer(pointer, w);
  return at === undefined ? undefined : memberPath(at) || undefined;
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
