/**
 * Executing one attempt of a run: its steps in order, each with its record. Expressions
 * see `{payload, steps: {key: output}, run: {id, attempt}, trigger: {key}, delivery: {id, headers} | null}`
 * (a write_fact with for_each adds `item` and `index`); every step type reads the one context.
 *
 * A step fails permanently on what a retry cannot change (an expression error, a fact
 * that does not fit its data model) and transiently on what it can (the database not
 * answering): the run then retries with backoff until its attempts are spent.
 * write_fact is at most once per (delivery, version, step, item) however often it runs, a
 * retry or a replay on the same version: each fact's source key is made of those four (see
 * sourceKey), and the fact table keeps one fact per source key.
 */
import type { Metrics } from '../metrics.ts';
import type { Db } from '../db/connect.ts';
import { createHash } from 'node:crypto';
import type { HttpRequestStep, StepRecord, WriteFactStep } from '../db/tables.ts';
import { failureSummary, isDatabaseUnavailable, isTransientDatabaseError, permanentFailure, WorkFailure } from '../errors.ts';
import { validateFact, type FactInput } from '../facts/validate.ts';
import { writeFacts, type FactStore } from '../facts/write.ts';
import { ExpressionError, ExpressionPoolError } from '../expressions/expressions.ts';
import type { ExpressionJob, ExpressionPool } from '../expressions/expression-pool.ts';
import type { ClaimedRun, Outcome } from './queue.sql.ts';
import type { ConnectorRow } from '../connectors/connectors.sql.ts';
import { claimedConnector } from '../connectors/connector-cache.ts';
import { connectorCall, previewCall, type CallParts, type RequestPreview } from '../connectors/call.ts';
import type { ConnectorRuntime } from '../connectors/runtime.ts';
import { saverMayCallConnectors } from '../auth/access.ts';
import { cutText, keptOutput } from './run-record.ts';
import { plainPath } from '../expressions/plain-path.ts';
import type { TraceSpan } from '../tracing.ts';
import { expressionDelivery, type ExpressionDelivery } from '../webhooks/delivery-headers.ts';

/** Items one write_fact step may store (for_each). */
export const MAX_FOR_EACH_ITEMS = 10_000;
/** Validation problems listed in a failed step's error. */
const MAX_LISTED_PROBLEMS = 5;

/** JSONata's $boolean: empty strings, arrays and objects, 0, null and nothing are false. */
export function truthy(v: unknown): boolean {
  if (v === undefined || v === null || v === false || v === 0 || v === '') return false;
  if (Array.isArray(v)) return v.some(truthy);
  if (typeof v === 'object') return Object.keys(v).length > 0;
  return true;
}

export interface StepEnv {
  db: Db;
  clock: () => number;
  /** Outbound calls (http_request); absent where no step calls out. */
  connectors?: ConnectorRuntime;
  expressions: ExpressionPool;
  /** A test run (runs/test-run.ts): the steps' effects are shown in `notes` instead of done. */
  dryRun?: DryRun;
  /** Where steps and facts are counted; absent in a test run, which is no run. */
  metrics?: Pick<Metrics, 'stepAttempt' | 'stepRetry' | 'factsWritten'>;
  /** The attempt's span (tracing.ts): each step's span is its child; undefined when tracing is off. */
  trace?: TraceSpan | undefined;
  /** Where write_fact stores: the worker's fact writer (batches concurrent runs); one statement per step when absent. */
  storeFacts?: FactStore;
  /** A step output past this (as JSON, RUN_STEP_OUTPUT_MAX_BYTES) is kept as its preview, for the record and the later steps (run-record.ts keptOutput). */
  outputMaxBytes: number;
}

/**
 * A test run's effect points: write_fact validates and shows its facts without storing them,
 * http_request shows its request and sends it only when `call` is safe and its method reads.
 */
export interface DryRun {
  call: 'none' | 'safe';
  /** What each step would have done, by step key. */
  notes: Map<string, DryRunNote>;
}

export interface DryRunNote {
  facts?: Array<{ observed_at: unknown; data: unknown; entity_id?: string | null }>;
  problems?: Array<{ item?: number; pointer: string; detail: string }>;
  request?: RequestPreview;
  response?: unknown;
  /** Why the step's output is what it is in a test run (a call not made). */
  note?: string;
}

/** Methods a test run may send with `call: "safe"`: they read, they do not change the provider's state. */
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** What every expression of a run sees. */
export interface Context {
  payload: unknown;
  steps: Record<string, unknown>;
  run: { id: string; attempt: number };
  trigger: { key: string | null };
  delivery: ExpressionDelivery | null;
}

/** A step's expressions, evaluated in one job of the pool (see ExpressionPool.run). */
async function evaluate(env: StepEnv, run: Pick<ClaimedRun, 'workspace_id'>, job: Omit<ExpressionJob, 'workspace'>): Promise<unknown[][]> {
  try {
    // The workspace: the pool serves waiting work round-robin by it.
    return await env.expressions.run({ ...job, workspace: run.workspace_id });
  } catch (err) {
    if (err instanceof ExpressionError) throw permanentFailure(err.message);
    // The pool's own trouble (closing at shutdown, a process lost to an outside signal): another attempt can succeed.
    if (err instanceof ExpressionPoolError) throw new WorkFailure(err.message, { transient: true, cause: err });
    throw err;
  }
}

/**
 * A fact's source key. With the run's source identity (its delivery, its schedule tick, or
 * the original's for a replay): `d:<sha256 of the identity, base64url>:v<version>:<step>:<index>`,
 * the same for every attempt and every replay on the version, another on a newer version.
 * A run made before source identities (none stored) keeps its run-id keys.
 */
export function sourceKey(run: Pick<ClaimedRun, 'id' | 'workflow_version' | 'source_identity'>, stepKey: string, index: number): string {
  if (run.source_identity === null) return `run:${run.id}:${stepKey}:${index}`;
  const digest = createHash('sha256').update(run.source_identity).digest('base64url');
  return `d:${digest}:v${run.workflow_version}:${stepKey}:${index}`;
}

/** The model's required fields a mapping names whose expression gave nothing: the step's error, or undefined. */
function missingRequired(model: ClaimedRun['models'][number], mapping: Record<string, string>, rows: unknown[][], forEach: boolean): string | undefined {
  const required = new Set(model.fields.filter((f) => f.is_required).map((f) => f.name));
  const fields = Object.keys(mapping)
    .map((name, i) => ({ name, i }))
    .filter((f) => required.has(f.name));
  if (fields.length === 0) return undefined;
  const problems: string[] = [];
  let count = 0;
  rows.forEach((row, index) => {
    for (const f of fields) {
      if (row[f.i] !== undefined) continue;
      count++;
      if (problems.length < MAX_LISTED_PROBLEMS)
        problems.push(
          `mapping.${f.name}${forEach ? ` (item ${index})` : ''}: the expression ${JSON.stringify(mapping[f.name])} gave nothing, and the data model ${model.slug} requires ${f.name}`,
        );
    }
  });
  if (count === 0) return undefined;
  return `${problems.join('; ')}${count > problems.length ? `; and ${count - problems.length} more` : ''}`;
}

const evaluateOne = async (env: StepEnv, run: ClaimedRun, expression: string, input: unknown) =>
  (await evaluate(env, run, { input, expressions: [expression] }))[0]![0];

async function writeFactStep(env: StepEnv, run: ClaimedRun, step: WriteFactStep, ctx: Context): Promise<unknown> {
  const c = step.config;
  const model = run.models.find((m) => m.slug === c.data_model_slug);
  if (!model) throw permanentFailure(`The data model ${JSON.stringify(c.data_model_slug)} does not exist in this workspace`);
  const fields = c.mapping ? Object.keys(c.mapping) : undefined;
  const expressions = c.mapping ? Object.values(c.mapping) : [c.data!];
  if (c.observed_at !== undefined) expressions.push(c.observed_at);
  const rows = await evaluate(env, run, { input: ctx, expressions, forEach: c.for_each, maxItems: MAX_FOR_EACH_ITEMS });
  // Said before validation, which would only say "is required": which expression gave nothing.
  const missing = c.mapping ? missingRequired(model, c.mapping, rows, c.for_each !== undefined) : undefined;
  // A test run still shows the would-be facts and every problem before it says so.
  if (missing !== undefined && !env.dryRun) throw permanentFailure(missing);
  const defaultObservedAt = new Date(run.inserted_at).toISOString();
  const items: FactInput[] = rows.map((row, index) => {
    let data: unknown = row[0];
    if (fields) {
      const obj: Record<string, unknown> = {};
      fields.forEach((field, i) => {
        if (row[i] !== undefined) obj[field] = row[i];
      });
      data = obj;
    }
    const observedAt = c.observed_at === undefined ? defaultObservedAt : row[expressions.length - 1];
    return { observed_at: observedAt ?? null, data: data ?? null, source_key: sourceKey(run, step.key, index) };
  });
  // All or nothing: one bad item fails the step before any of its facts is stored.
  const problems: string[] = [];
  let count = 0;
  const dry = env.dryRun && {
    facts: items.map(({ observed_at, data }): NonNullable<DryRunNote['facts']>[number] => ({ observed_at, data })),
    problems: [] as NonNullable<DryRunNote['problems']>,
  };
  if (dry) env.dryRun!.notes.set(step.key, dry);
  items.forEach((item, index) => {
    const v = validateFact(model, item);
    // A test run shows a valid fact as it would be stored: its instant and datetimes normalized, its entity.
    if (v.ok && dry) dry.facts[index] = { observed_at: v.fact.observedAt, data: v.fact.data, entity_id: v.fact.entityId };
    if (v.ok) return;
    for (const e of v.errors) {
      dry?.problems.push({ ...(c.for_each === undefined ? {} : { item: index }), pointer: e.pointer, detail: e.detail });
      count++;
      if (problems.length < MAX_LISTED_PROBLEMS) problems.push(`${c.for_each === undefined ? 'the fact' : `item ${index}`}: ${e.pointer.slice(1)} ${e.detail}`);
    }
  });
  if (missing !== undefined) throw permanentFailure(missing);
  if (count > 0)
    throw permanentFailure(
      `The fact does not fit the data model ${model.slug}: ${problems.join('; ')}${count > problems.length ? `; and ${count - problems.length} more` : ''}`,
    );
  if (dry) return { data_model_slug: model.slug, items: items.length, written: items.length, duplicates: 0 };
  const result = await writeFacts(env.db, { organizationId: run.organization_id, workspaceId: run.workspace_id }, model, items, env.metrics, env.storeFacts);
  return { data_model_slug: model.slug, items: items.length, written: result.written, duplicates: result.duplicates };
}

/** A step's computed parameter or header: a string, number or boolean, as text; nothing leaves it out. */
function scalars(names: string[], values: unknown[], what: string): Record<string, string> {
  const out: Record<string, string> = {};
  names.forEach((name, i) => {
    const v = values[i];
    if (v === undefined || v === null) return;
    if (typeof v !== 'string' && typeof v !== 'number' && typeof v !== 'boolean')
      throw permanentFailure(`${what}.${name} must be a string, number or boolean; the expression gave ${Array.isArray(v) ? 'an array' : typeof v}`);
    const text = String(v);
    if (/[\r\n\0]/.test(text)) throw permanentFailure(`${what}.${name} must not hold line breaks or NUL`);
    out[name] = text;
  });
  return out;
}

/** What one attempt reads once however many calls it makes: connectors by id, and whether the version's saver may still call out. */
interface AttemptReads {
  connectors: Map<string, ConnectorRow | undefined>;
  saverMay?: boolean;
}

/** The values of the expressions when every one is a plain path (plain-path.ts), read here; else undefined, for the pool. */
function plainPaths(expressions: string[], input: unknown): unknown[] | undefined {
  const values: unknown[] = [];
  for (const e of expressions) {
    const read = plainPath(e, input);
    if (read === undefined) return undefined;
    values.push(read.value);
  }
  return values;
}

const SAVER_MAY_NOT_CALL_OUT =
  'The steps of this workflow version were saved by a membership that is no longer an active admin or owner, so they may not call out through a connector: an admin or owner must save the workflow again';

async function httpRequestStep(
  env: StepEnv,
  run: ClaimedRun,
  step: HttpRequestStep,
  ctx: Context,
  reads: AttemptReads,
  span: TraceSpan | undefined,
): Promise<unknown> {
  const c = step.config;
  if (!env.connectors) throw permanentFailure('This worker cannot call out');
  // Checked at every attempt, not only at save: a saver demoted or deactivated since stops the calls.
  reads.saverMay ??= saverMayCallConnectors(run.saver ?? undefined);
  if (!reads.saverMay) throw permanentFailure(SAVER_MAY_NOT_CALL_OUT);
  const rows = reads.connectors;
  if (!rows.has(c.connector_id))
    rows.set(c.connector_id, await claimedConnector(env.db, env.connectors.kept, run.workspace_id, c.connector_id, run.connector_versions));
  const row = rows.get(c.connector_id);
  if (!row) throw permanentFailure('The connector of this step no longer exists in the workspace');
  // The target is checked against the connector before any expression is evaluated.
  const send = connectorCall(env.connectors, row, c, `${run.id}:${step.key}:0`);
  // Every expression of the step in one job: params, query, headers, then the body.
  const groups = (['params', 'query', 'headers'] as const).map((what) => ({
    what,
    names: Object.keys(c[what] ?? {}),
    expressions: Object.values(c[what] ?? {}),
  }));
  const expressions = groups.flatMap((g) => g.expressions);
  if (c.body !== undefined) expressions.push(c.body);
  const values = expressions.length === 0 ? [] : (plainPaths(expressions, ctx) ?? (await evaluate(env, run, { input: ctx, expressions }))[0]!);
  let offset = 0;
  const [params, query, sent] = groups.map((g) => scalars(g.names, values.slice(offset, (offset += g.names.length)), g.what));
  const parts = { params: params!, query: query!, headers: sent!, body: c.body === undefined ? undefined : values[offset] };
  if (env.dryRun) return dryRunCall(env.dryRun, step.key, previewCall(env.connectors, row, c, `${run.id}:${step.key}:0`), parts, span);
  const res = await send(parts, span);
  const { 'set-cookie': _cookie, ...headers } = res.headers;
  return { status: res.status, headers, body: res.body };
}

/** A test run's http_request: the request shown, sent only when asked to and safe (without taking the rate budget). */
async function dryRunCall(dry: DryRun, key: string, preview: ReturnType<typeof previewCall>, parts: CallParts, span: TraceSpan | undefined): Promise<unknown> {
  const { request, send } = await preview(parts);
  const note: DryRunNote = { request };
  dry.notes.set(key, note);
  if (dry.call !== 'safe' || send === undefined || !SAFE_METHODS.has(request.method ?? '')) {
    note.note =
      dry.call !== 'safe'
        ? 'Not sent (call is "none"): the output is null, and the next steps see null'
        : `Not sent: only GET, HEAD and OPTIONS calls of an http connector are made in a test run; the output is null, and the next steps see null`;
    return null;
  }
  const res = await send(span);
  const { 'set-cookie': _cookie, ...headers } = res.headers;
  note.response = { status: res.status, headers, body: res.body };
  return note.response;
}

/** When a failed attempt is tried again (RUN_RETRY_SCHEDULE, RUN_RETRY_AFTER_MAX). */
export interface RetryPolicy {
  /** Delays before the 2nd, 3rd, ... attempt; attempts past the list wait its last entry. */
  readonly schedule: readonly number[];
  /** The longest a provider's Retry-After may hold a run back. */
  readonly retryAfterMaxMs: number;
}

/** Jitter: up to this share of the delay is added, so runs failed together do not all come back at once. */
export const RETRY_JITTER = 0.1;

/** Delay before attempt `attempt + 1`: the schedule's entry for it, plus up to 10% jitter; never shorter than the entry. */
export function backoffMs(attempt: number, schedule: readonly number[], random: () => number = Math.random): number {
  const base = schedule[Math.min(Math.max(0, attempt - 1), schedule.length - 1)]!;
  return Math.round(base + random() * base * RETRY_JITTER);
}

/** The wait before the next attempt: the schedule's, or a provider's Retry-After when longer (up to its cap). */
export function retryDelayMs(attempt: number, retry: RetryPolicy, retryAfterMs: number | undefined, random: () => number = Math.random): number {
  return Math.max(backoffMs(attempt, retry.schedule, random), Math.min(retry.retryAfterMaxMs, retryAfterMs ?? 0));
}

/** How many facts a write_fact output says it stored. */
const writtenBy = (output: unknown) => (typeof (output as { written?: unknown } | null)?.written === 'number' ? (output as { written: number }).written : 0);

/** What a run's expressions see before its first step (a test run shows it as each step's input). */
export function runContext(run: ClaimedRun): Context {
  return {
    payload: run.payload,
    steps: {},
    run: { id: run.id, attempt: run.attempt },
    trigger: { key: run.trigger_key },
    delivery: expressionDelivery(run.delivery_id, run.delivery_headers),
  };
}

export async function executeRun(env: StepEnv, run: ClaimedRun, retry: RetryPolicy): Promise<Outcome> {
  const ctx = runContext(run);
  const records: StepRecord[] = [];
  const reads: AttemptReads = { connectors: new Map() };
  const iso = () => new Date(env.clock()).toISOString();
  let factsWritten = 0;
  const skipRest = (from: number, reason: string) => {
    for (const s of run.definition.slice(from))
      records.push({ key: s.key, status: 'skipped', started_at: null, finished_at: null, output: null, error: null, reason });
  };
  for (let i = 0; i < run.definition.length; i++) {
    const step = run.definition[i]!;
    const startedAt = iso();
    const span = env.trace?.child(`workflow.step ${step.type}`, 'internal', {
      'tributary.step.key': step.key,
      'tributary.step.type': step.type,
      'tributary.step.index': i,
      'tributary.run.attempt': run.attempt,
    });
    try {
      let output: unknown;
      let value: unknown;
      switch (step.type) {
        case 'transform':
          output = await evaluateOne(env, run, step.config.expression, ctx);
          break;
        case 'condition': {
          value = await evaluateOne(env, run, step.config.expression, ctx);
          output = truthy(value);
          break;
        }
        case 'write_fact':
          output = await writeFactStep(env, run, step, ctx);
          factsWritten += writtenBy(output);
          break;
        case 'http_request':
          output = await httpRequestStep(env, run, step, ctx, reads, span);
          break;
        default: {
          // Unreachable by type, not by data: a version saved by a later release may hold a type this one does not know.
          const stored: { type: string } = step;
          throw permanentFailure(`Steps of type ${stored.type} cannot run in this release`);
        }
      }
      env.metrics?.stepAttempt(step.type, 'succeeded');
      span?.set({ 'tributary.step.outcome': 'succeeded' });
      span?.end();
      // Kept within the cap from here on: what the record keeps is what the later steps see.
      const kept = keptOutput(output, env.outputMaxBytes);
      output = undefined;
      const record: StepRecord = { key: step.key, status: 'succeeded', started_at: startedAt, finished_at: iso(), ...kept, error: null };
      // What the expression gave, before truthiness (nothing is shown as null).
      if (step.type === 'condition') record.value = conditionValue(value);
      records.push(record);
      ctx.steps[step.key] = kept.output;
      if (step.type === 'condition' && kept.output === false) {
        skipRest(i + 1, `condition false at step ${step.key}`);
        return { status: 'succeeded', outcome: 'stopped_at_condition', steps: records, error: null, factsWritten };
      }
    } catch (err) {
      const failure = stepFailure(err);
      env.metrics?.stepAttempt(step.type, 'failed');
      records.push({ key: step.key, status: 'failed', started_at: startedAt, finished_at: iso(), output: null, error: failure.message });
      skipRest(i + 1, `step ${step.key} failed`);
      const error = `Step ${step.key} failed: ${failure.message}`;
      // An error none of ours named is kept for the log, with its stack; the record says only that it happened.
      const unexpected = err instanceof WorkFailure || failure.transient ? undefined : err;
      const status = (err as { status?: unknown }).status;
      const failed = {
        step: step.key,
        code: unexpected !== undefined ? 'unexpected' : failure.transient ? 'transient' : 'permanent',
        message: failure.message,
        ...(typeof status === 'number' ? { status } : {}),
      };
      const common = { steps: records, error, factsWritten, failure: failed, ...(unexpected === undefined ? {} : { unexpected }) };
      span?.set({ 'tributary.step.outcome': 'failed', 'tributary.step.transient': failure.transient });
      span?.fail(failed.code, failureSummary(failure.message));
      span?.end();
      if (!failure.transient) return { status: 'failed', outcome: 'failed', ...common };
      // A transient failure on the last attempt: the run is given up, a dead letter.
      if (run.attempt >= run.max_attempts) return { status: 'failed', outcome: 'dead_letter', ...common };
      env.metrics?.stepRetry(step.type);
      const wait = retryDelayMs(run.attempt, retry, failure.retryAfterMs);
      return { status: 'retrying', outcome: null, ...common, runAt: new Date(env.clock() + wait) };
    }
  }
  return { status: 'succeeded', outcome: 'completed', steps: records, error: null, factsWritten };
}

/** A condition's value as its record keeps it: whole when small, else the start of its JSON (a condition's value is for reading, not a store). */
const CONDITION_VALUE_MAX_BYTES = 1024;
function conditionValue(v: unknown): unknown {
  if (v === undefined) return null;
  const json = JSON.stringify(v) ?? 'null';
  if (Buffer.byteLength(json) <= CONDITION_VALUE_MAX_BYTES) return v;
  return cutText(json, CONDITION_VALUE_MAX_BYTES, ` ... [cut: ${Buffer.byteLength(json)} bytes]`);
}

/**
 * Whatever a step threw, in the worker's one vocabulary: the failures of steps and connectors
 * as they are, the database unreachable, busy or in conflict as transient, anything else as
 * a permanent failure that keeps the error as its cause.
 */
export function stepFailure(err: unknown): WorkFailure {
  if (err instanceof WorkFailure) return err;
  if (isDatabaseUnavailable(err)) return new WorkFailure('The database was unavailable', { transient: true, cause: err });
  if (isTransientDatabaseError(err)) return new WorkFailure('The database refused the step for now', { transient: true, cause: err });
  return new WorkFailure('The step failed unexpectedly', { transient: false, cause: err });
}
