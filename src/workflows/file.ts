/**
 * A workflow file (the YAML or JSON of `workflow get --yaml`, docs/cli.md) read into the
 * builder state's parts, with every problem at its member path and its line and column.
 * Pure (only the `yaml` package): the CLI reads files with it, the test run of a definition
 * reads the text it is sent, and the console's editor reads what is being typed, so the three
 * agree on what a file means and where a save's error points in it.
 */
import { isMap, isScalar, isSeq, LineCounter, parseDocument, stringify } from 'yaml';

type Obj = Record<string, unknown>;
export type MemberPath = ReadonlyArray<string | number>;

function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** A member path as a reader of the file writes it: steps.shape.mapping.amount, triggers.shop.cron. */
export function memberPath(parts: MemberPath): string {
  return parts
    .map((p, i) => (typeof p === 'number' ? `[${p}]` : /^[A-Za-z_][A-Za-z0-9_-]*$/.test(p) ? `${i === 0 ? '' : '.'}${p}` : `[${JSON.stringify(p)}]`))
    .join('');
}

export interface Position {
  /** 1-based, as editors count. */
  line: number;
  column: number;
}

/** A file's problem: where (its member path, empty for the whole file), what, and, once located, its line. */
export class WorkflowFileProblem extends Error {
  readonly at: MemberPath;
  readonly problem: string;
  readonly position: Position | undefined;
  constructor(at: MemberPath, problem: string, position?: Position) {
    super(`${at.length > 0 ? `at ${memberPath(at)}: ` : ''}${problem}${position ? ` (line ${position.line}, column ${position.column})` : ''}`);
    this.at = at;
    this.problem = problem;
    this.position = position;
  }
}

export interface WorkflowFileStep {
  key: string;
  type: string;
  config: Obj;
}

export interface WorkflowFileTrigger {
  key: string;
  type: string;
  members: Obj;
}

export interface WorkflowFile {
  name: string;
  description: string | null;
  is_active: boolean;
  lock_version: string | null;
  /** {key, limit}, or null: no limit (docs/workflows.md, "Concurrency"). */
  concurrency: Obj | null;
  /** The expression naming the state document a run reads and writes, or null: one document (docs/workflows.md, "Workflow state"). */
  state_key: string | null;
  steps: WorkflowFileStep[];
  /** Run once when a run fails for good (the file's `on_failure:`, shaped as `steps:`). */
  on_failure: WorkflowFileStep[];
  /** Webhooks without service_account_id take the applying account's. */
  triggers: WorkflowFileTrigger[];
}

export const WORKFLOW_FILE_MEMBERS = [
  'name',
  'description',
  'is_active',
  'lock_version',
  'concurrency',
  'state_key',
  'triggers',
  'steps',
  'on_failure',
] as const;

const STEP_TYPE_NAMES = 'transform, condition, write_fact, http_request, switch, for_each, delay, wait_until, wait_for_delivery or set_state';

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
  // on_timeout is "fail", "continue", or steps.
  if (type === 'wait_for_delivery' && (Array.isArray(config.on_timeout) || isObj(config.on_timeout))) return [['on_timeout']];
  return [];
}

function getAt(o: unknown, path: MemberPath): unknown {
  let v = o;
  for (const p of path) v = isObj(v) || Array.isArray(v) ? (v as Record<string | number, unknown>)[p] : undefined;
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
function stepsOfDoc(v: unknown, at: Array<string | number>): WorkflowFileStep[] {
  const items: Array<[string, Obj, Array<string | number>]> = Array.isArray(v)
    ? v.map((item, i) => {
        if (!isObj(item)) throw new WorkflowFileProblem([...at, i], 'must be an object with key and type');
        const { key, ...rest } = item;
        if (typeof key !== 'string' || key === '') throw new WorkflowFileProblem([...at, i, 'key'], 'key must be a name');
        return [key, rest, [...at, key]];
      })
    : isObj(v)
      ? Object.entries(v).map(([key, item]): [string, Obj, Array<string | number>] => {
          if (!isObj(item)) throw new WorkflowFileProblem([...at, key], 'must be an object {type, ...}');
          return [key, item, [...at, key]];
        })
      : v === undefined || v === null
        ? []
        : (() => {
            throw new WorkflowFileProblem(at, 'must be a map of key: {type, ...} (or a list)');
          })();
  return items.map(([key, item, sat]) => {
    if (typeof item.type !== 'string') throw new WorkflowFileProblem([...sat, 'type'], `type is required: ${STEP_TYPE_NAMES}`);
    const { type, ...config } = item;
    return { key, type, config: mapLists(type, withoutNulls(config), (list, path) => stepsOfDoc(list, [...sat, ...path])) };
  });
}

/** A list of steps in the file's terms: a map of key: {type, ...}, nested lists alike. */
function stepsToFile(steps: readonly WorkflowFileStep[]): Obj {
  return Object.fromEntries(
    steps.map((s) => [
      s.key,
      inFileOrder({ type: s.type, ...mapLists(s.type, s.config, (list) => stepsToFile(Array.isArray(list) ? (list as WorkflowFileStep[]) : [])) }),
    ]),
  );
}

/** The API's stored steps, nulls dropped at every depth. */
function storedSteps(v: unknown): WorkflowFileStep[] {
  return (Array.isArray(v) ? (v as WorkflowFileStep[]) : []).map((s) => ({
    key: s.key,
    type: s.type,
    config: mapLists(s.type, withoutNulls(s.config ?? {}), (list) => storedSteps(list)),
  }));
}

/** The path in the file of a pointer's rest under one step (`config/cases/0/steps/1/config/expression`): nested steps by key. */
function stepPath(step: WorkflowFileStep, rest: string[]): Array<string | number> {
  if (rest[0] !== 'config') return rest[0] === 'key' || rest.length === 0 ? [step.key] : [step.key, ...rest];
  const tail = rest.slice(1);
  for (const path of nestedLists(step.type, step.config)) {
    const names = path.map(String);
    if (names.every((p, k) => tail[k] === p) && tail.length > names.length) {
      const list = getAt(step.config, path);
      const inner = Array.isArray(list) ? (list as WorkflowFileStep[])[Number(tail[names.length])] : undefined;
      if (inner) return [step.key, ...path, ...stepPath(inner, tail.slice(names.length + 1))];
    }
  }
  return [step.key, ...tail];
}

function only(obj: Obj, allowed: readonly string[], at: Array<string | number>, what: string): void {
  for (const k of Object.keys(obj)) {
    if (!allowed.includes(k)) throw new WorkflowFileProblem([...at, k], `${JSON.stringify(k)} is not a member of ${what} (allowed: ${allowed.join(', ')})`);
  }
}

/**
 * A map keyed by name, or a list of objects with `key` (or `name` for fields): the entries in
 * order, each with its name and its member path (by name, as a reader says it).
 */
export function fileEntries(v: unknown, at: string, nameMember: 'key' | 'name'): Array<[string, Obj, Array<string | number>]> {
  if (v === undefined || v === null) return [];
  if (Array.isArray(v)) {
    return v.map((item, i) => {
      if (!isObj(item)) throw new WorkflowFileProblem([at, i], `must be an object with ${nameMember} and type`);
      const name = item[nameMember];
      if (typeof name !== 'string' || name === '') throw new WorkflowFileProblem([at, i, nameMember], `${nameMember} must be a name`);
      const { [nameMember]: _name, ...rest } = item;
      return [name, rest, [at, name]];
    });
  }
  if (!isObj(v)) throw new WorkflowFileProblem([at], `must be a map of name: {type, ...} (or a list)`);
  return Object.entries(v).map(([name, item]) => {
    if (!isObj(item)) throw new WorkflowFileProblem([at, name], 'must be an object {type, ...}');
    return [name, item, [at, name]];
  });
}

/** Drops members whose value is null: the server stores a config without them. */
export function withoutNulls(o: Obj): Obj {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== null && v !== undefined));
}

/** The file's document (already parsed) as a workflow; throws WorkflowFileProblem without a position. */
export function readWorkflowDocument(doc: unknown): WorkflowFile {
  if (!isObj(doc)) throw new WorkflowFileProblem([], 'must be a map with name, steps and triggers');
  only(doc, WORKFLOW_FILE_MEMBERS, [], 'a workflow file');
  if (typeof doc.name !== 'string' || doc.name.trim() === '') throw new WorkflowFileProblem(['name'], 'name is required (a string)');
  if (doc.description !== undefined && doc.description !== null && typeof doc.description !== 'string')
    throw new WorkflowFileProblem(['description'], 'description must be a string');
  if (doc.is_active !== undefined && typeof doc.is_active !== 'boolean') throw new WorkflowFileProblem(['is_active'], 'is_active must be true or false');
  if (doc.lock_version !== undefined && doc.lock_version !== null && typeof doc.lock_version !== 'string')
    throw new WorkflowFileProblem(['lock_version'], 'lock_version must be the string `tributary workflow get --yaml` wrote');
  // Its members are the server's to check (wf_params.concurrency); the pointers come back as concurrency.key, concurrency.limit.
  if (doc.concurrency !== undefined && doc.concurrency !== null && !isObj(doc.concurrency))
    throw new WorkflowFileProblem(['concurrency'], 'concurrency must be a map {key, limit} (or null)');
  if (doc.state_key !== undefined && doc.state_key !== null && typeof doc.state_key !== 'string')
    throw new WorkflowFileProblem(['state_key'], 'state_key must be an expression (a string), or null');
  const steps = stepsOfDoc(doc.steps, ['steps']);
  const onFailure = stepsOfDoc(doc.on_failure, ['on_failure']);
  if (steps.length === 0) throw new WorkflowFileProblem(['steps'], 'steps must name at least one step');
  const triggers = fileEntries(doc.triggers, 'triggers', 'key').map(([key, item, at]) => {
    if (typeof item.type !== 'string') throw new WorkflowFileProblem([...at, 'type'], 'type is required: webhook or schedule');
    const { type, ...members } = item;
    return { key, type, members: withoutNulls(members) };
  });
  return {
    name: doc.name.trim(),
    description: (doc.description as string | null | undefined) ?? null,
    is_active: (doc.is_active as boolean | undefined) ?? true,
    lock_version: (doc.lock_version as string | null | undefined) ?? null,
    concurrency: (doc.concurrency as Obj | null | undefined) ?? null,
    state_key: (doc.state_key as string | null | undefined) ?? null,
    steps,
    on_failure: onFailure,
    triggers,
  };
}

export interface ParsedWorkflowText {
  file: WorkflowFile;
  /** Where a member of the file starts (its key's line), or the nearest member above it that is there. */
  locate: (at: MemberPath) => Position;
}

/**
 * The text of a workflow file, YAML or JSON (JSON is read as the YAML it also is, so both get
 * lines): the workflow, or a WorkflowFileProblem with its line and column.
 */
export function parseWorkflowText(text: string): ParsedWorkflowText {
  const lines = new LineCounter();
  const doc = parseDocument(text, { prettyErrors: false, uniqueKeys: true, lineCounter: lines });
  const first = doc.errors[0];
  if (first) {
    const pos = lines.linePos(first.pos[0]);
    const what = first.message.split('\n')[0]!.replace(/ at line \d+, column \d+:?$/, '');
    throw new WorkflowFileProblem([], `not valid YAML: ${what}`, { line: pos.line, column: pos.col });
  }
  const locate = (at: MemberPath): Position => {
    let node: unknown = doc.contents;
    let offset = 0;
    for (const part of at) {
      if (isMap(node)) {
        const pair = node.items.find((p) => isScalar(p.key) && String(p.key.value) === String(part));
        // A list of steps keyed by `key`: the item whose key member is this name.
        if (!pair) break;
        offset = (isScalar(pair.key) ? pair.key.range?.[0] : undefined) ?? offset;
        node = pair.value;
      } else if (isSeq(node)) {
        const item =
          typeof part === 'number' || /^\d+$/.test(part)
            ? node.items[Number(part)]
            : node.items.find((i) => isMap(i) && i.items.some((p) => isScalar(p.key) && p.key.value === 'key' && isScalar(p.value) && p.value.value === part));
        if (!item) break;
        offset = (item as { range?: [number, number, number] }).range?.[0] ?? offset;
        node = item;
      } else break;
    }
    const pos = lines.linePos(offset);
    return { line: pos.line, column: pos.col };
  };
  let file: WorkflowFile;
  try {
    file = readWorkflowDocument(doc.toJS({ maxAliasCount: 100 }));
  } catch (err) {
    if (err instanceof WorkflowFileProblem) throw new WorkflowFileProblem(err.at, err.problem, locate(err.at));
    throw err;
  }
  return { file, locate };
}

/**
 * The builder state's parts of a file (save_builder_state's wf_params, step_params and
 * trigger_params); a webhook without service_account_id takes `ownAccount`'s.
 */
export function builderParts(w: WorkflowFile, ownAccount?: string): { wf_params: Obj; step_params: Obj[]; on_failure_params: Obj[]; trigger_params: Obj[] } {
  return {
    wf_params: { name: w.name, description: w.description, is_active: w.is_active, concurrency: w.concurrency, state_key: w.state_key },
    step_params: w.steps.map((s) => ({ key: s.key, type: s.type, config: s.config })),
    // The file is the whole workflow: no on_failure in it is none.
    on_failure_params: w.on_failure.map((s) => ({ key: s.key, type: s.type, config: s.config })),
    trigger_params: w.triggers.map((t) => ({
      key: t.key,
      type: t.type,
      ...t.members,
      ...(t.type === 'webhook' && t.members.service_account_id === undefined && ownAccount !== undefined ? { service_account_id: ownAccount } : {}),
    })),
  };
}

/**
 * A pointer of the server's answer to a save (`/data/attributes/step_params/0/config/mapping/amount`)
 * as the file's member path (`['steps', 'store', 'mapping', 'amount']`); undefined when it
 * points elsewhere.
 */
export function filePathOfPointer(pointer: string, w: WorkflowFile): Array<string | number> | undefined {
  const parts = pointer
    .split('/')
    .slice(1)
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
  if (parts[0] !== 'data' || parts[1] !== 'attributes') return undefined;
  const [member, index, ...rest] = parts.slice(2);
  if (member === 'wf_params') return index === undefined ? [] : [index, ...rest];
  if (member === 'lock_version') return ['lock_version'];
  const i = Number(index);
  if (member === 'step_params' && w.steps[i]) return ['steps', ...stepPath(w.steps[i]!, rest)];
  if (member === 'on_failure_params' && w.on_failure[i]) return ['on_failure', ...stepPath(w.on_failure[i]!, rest)];
  if (member === 'trigger_params' && w.triggers[i]) return ['triggers', w.triggers[i]!.key, ...(rest[0] === 'key' ? [] : rest)];
  return undefined;
}

/** The current workflow resource's attributes in the file's terms. */
export function workflowOfResource(attrs: Obj): WorkflowFile {
  const triggers = (Array.isArray(attrs.triggers) ? attrs.triggers : []) as Obj[];
  return {
    name: String(attrs.name),
    description: (attrs.description as string | null) ?? null,
    is_active: attrs.is_active === true,
    lock_version: (attrs.lock_version as string | null) ?? null,
    concurrency: isObj(attrs.concurrency) ? attrs.concurrency : null,
    state_key: typeof attrs.state_key === 'string' ? attrs.state_key : null,
    steps: storedSteps(attrs.steps),
    on_failure: storedSteps(attrs.on_failure),
    triggers: triggers.map((t) => {
      const { id: _id, key, type, next_fire_at: _next, ...members } = t;
      return { key: String(key), type: String(type), members: withoutNulls(members) };
    }),
  };
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
  'duration',
  'at',
  'trigger',
  'match',
  'timeout',
  'on_timeout',
  'value',
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
  if (w.state_key !== null) doc.state_key = w.state_key;
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
  const body = stringify(doc, { lineWidth: 0, aliasDuplicateObjects: false });
  return header ? `${header}\n${body}` : body;
}

/** What `workflow get --yaml` writes above a workflow's file. */
export const WORKFLOW_FILE_HEADER =
  '# tributary workflow apply -f <this file>: saved by name. lock_version is the version this file was read at:\n' +
  '# a save over a change made since is refused. Webhooks without service_account_id use the applying account.';

/** JSON with every object's members sorted: two values are the same exactly when their texts are. */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (isObj(v))
    return `{${Object.keys(v)
      .sort()
      .filter((k) => v[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${canonical(v[k])}`)
      .join(',')}}`;
  return JSON.stringify(v);
}

/** Whether two files' steps differ (then a save is a new version, as `workflow apply` decides). */
export function stepsDiffer(a: WorkflowFile, b: WorkflowFile): boolean {
  const versioned = (w: WorkflowFile) => canonical({ steps: w.steps, on_failure: w.on_failure, concurrency: w.concurrency, state_key: w.state_key });
  return versioned(a) !== versioned(b);
}
