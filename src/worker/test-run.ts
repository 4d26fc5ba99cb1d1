/**
 * A test run: one workflow version executed on a payload the caller gives, by the worker's
 * own executeRun against the dry effects (steps/effects.ts), and nothing written. Transform and condition steps
 * evaluate as in a run; write_fact validates and shows the facts it would store;
 * http_request shows the request it would send (credentials redacted) and sends it only
 * when the caller asks for safe calls and its method reads (GET, HEAD, OPTIONS), without
 * taking the connector's rate budget. No run row, fact, delivery guard or rate window is
 * written: the answer is all there is.
 *
 * Test runs are a class apart that never delays runs: their expressions go to their own
 * children (Deps.testExpressions, started at a lower OS priority), and each workspace has
 * at most config.testRuns.concurrency of them at once in a process and config.testRuns.max
 * per window (shared through Redis when it is configured); past either, a 429 `rate_limited`
 * with Retry-After.
 */
import type { Db } from '../db/connect.ts';
import type { ItemRecord, StepRecord, WorkflowStep } from '../db/tables.ts';
import { AppError, invalidAt } from '../errors.ts';
import { authorize } from '../auth/access.ts';
import type { Principal } from '../auth/principal.ts';
import { isUuid, uuidv7 } from '../ids.ts';
import type { InputSchema } from '../input.ts';
import type { ConnectorRuntime } from '../connectors/runtime.ts';
import { executeRun, findStep, runContext } from './execute.ts';
import { dryEffects, type DryRunNote } from '../steps/effects.ts';
import { stepTypeOf } from '../steps/index.ts';
import type { ParkedDelivery } from '../steps/step.ts';
import { deliveryHeaders, expressionDelivery } from '../triggers/delivery-headers.ts';
import { runStateKey } from '../runs/state-key.ts';
import { readWorkflowState, STATE_KEY } from '../runs/state.sql.ts';
import { deliveryHeader, MAX_DELIVERY_ID_LENGTH } from '../triggers/identity.ts';
import type { ClaimedRun } from '../runs/queue.sql.ts';
import type { ExpressionPool } from '../expressions/expression-pool.ts';
import { fileContext, loadTestedVersion, type TestedVersion } from './test-run.sql.ts';
import { builderParts, filePathOfPointer, memberPath, parseWorkflowText, WorkflowFileProblem, type ParsedWorkflowText } from '../workflows/file.ts';
import { checkDefinition, everyStep, type SaveLimits } from '../resources/workflows/service.ts';
import type { Limiter } from '../limiter.ts';
import type { Config } from '../config.ts';
import type { TraceSpan } from '../tracing.ts';
import { ANSWER_CAPS, capSteps, cutText, jsonBytes, PAYLOAD_SHOWN_BYTES, PREVIEW_BYTES } from '../runs/run-record.ts';

/**
 * An answer stays bounded as a run's does: each step's input within PAYLOAD_SHOWN_BYTES
 * (beyond, a preview), outputs and errors within the run record's answer caps, and at most
 * SHOWN_ITEMS would-be facts and problems per step (with how many more there were).
 */
export const SHOWN_ITEMS = 100;

function shownInput(input: unknown): { input: unknown; input_truncated?: true; input_bytes?: number } {
  const bytes = jsonBytes(input);
  if (bytes <= PAYLOAD_SHOWN_BYTES) return { input };
  return { input: cutText(JSON.stringify(input), PREVIEW_BYTES), input_truncated: true, input_bytes: bytes };
}

function shownItems<T>(name: 'facts' | 'problems', items: T[]): Record<string, unknown> {
  return items.length <= SHOWN_ITEMS ? { [name]: items } : { [name]: items.slice(0, SHOWN_ITEMS), [`${name}_not_shown`]: items.length - SHOWN_ITEMS };
}

/** A workflow file is at most this many characters (256 Ki): a workflow's 50 steps with room for their expressions. */
export const WORKFLOW_FILE_MAX_CHARS = 262_144;

export const TEST_RUN_CALLS = ['none', 'safe'] as const;
export type TestRunCall = (typeof TEST_RUN_CALLS)[number];

/** The attributes of a workflow_test_run document besides `payload` (any JSON, read by the surface). */
export const testRunInput: InputSchema = {
  version: { kind: 'integer', min: 1, max: 2_147_483_647 },
  // The unsaved file (docs/workflows.md, "Test runs"): tested as its save would be read, in place of a version.
  workflow_file: { kind: 'string', max: WORKFLOW_FILE_MAX_CHARS, trim: false },
  trigger_key: { kind: 'string', nullable: true, max: 63 },
  delivery_id: { kind: 'string', nullable: true, max: MAX_DELIVERY_ID_LENGTH },
  call: { kind: 'enum', values: TEST_RUN_CALLS },
};

export interface TestRunInput {
  payload: unknown;
  /** The sample delivery's headers as given (validated by the surface); redacted and lowercased here, as a delivery's are. */
  headers?: Record<string, string> | undefined;
  /** The sample delivery's id; absent: the value of its delivery-id header (triggers/identity.ts), else null. */
  delivery_id?: string | null | undefined;
  version?: number | undefined;
  /** The text of a workflow file (YAML or JSON, as `workflow get --yaml` writes it), tested instead of a saved version. */
  workflow_file?: string | undefined;
  trigger_key?: string | null | undefined;
  call?: TestRunCall | undefined;
  /** Sample deliveries for wait_for_delivery steps, by step key: the step goes on as if that delivery had matched. */
  deliveries?: Record<string, { payload: unknown; headers?: Record<string, string> }> | undefined;
}

export interface TestRunDeps {
  db: Db;
  clock: () => number;
  connectors?: ConnectorRuntime;
  /** The test runs' own pool, not the runs'. */
  testExpressions: ExpressionPool;
  limiter: Limiter;
  /** The test-run limits, and the run record's caps: a step output past its cap is kept as its preview, as in a run. */
  config: {
    testRuns: Pick<Config['testRuns'], 'concurrency' | 'max' | 'windowSeconds'>;
    runRecord: { outputBytes: number };
  } & Partial<SaveLimits>;
  testRunsInProgress: Map<string, number>;
}

/**
 * A slot of the workspace's test runs, or a 429: the concurrency in this process first (a
 * refused one is not counted in the window), then the workspace's window. Call the release once.
 */
async function testRunSlot(deps: TestRunDeps, workspaceId: string): Promise<() => void> {
  const limits = deps.config.testRuns;
  const held = deps.testRunsInProgress.get(workspaceId) ?? 0;
  if (held >= limits.concurrency)
    throw new AppError('rate_limited', `This workspace already has ${limits.concurrency} test runs in progress; retry after the indicated time`, {
      retryAfter: 1,
    });
  deps.testRunsInProgress.set(workspaceId, held + 1);
  const release = () => {
    const n = (deps.testRunsInProgress.get(workspaceId) ?? 1) - 1;
    if (n <= 0) deps.testRunsInProgress.delete(workspaceId);
    else deps.testRunsInProgress.set(workspaceId, n);
  };
  let r;
  try {
    r = await deps.limiter.hit(`testrun:${workspaceId}`, limits.max, limits.windowSeconds);
  } catch (err) {
    release();
    throw err;
  }
  if (!r.allowed) {
    release();
    throw new AppError(
      'rate_limited',
      `This workspace's test runs are limited to ${limits.max} per ${limits.windowSeconds} s; retry after the indicated time`,
      {
        retryAfter: r.resetSeconds,
      },
    );
  }
  return release;
}

export type TestRunOutcome = 'completed' | 'stopped_at_condition' | 'failed';

/** Whether the step, or a step it holds, calls out through a connector. */
const usesConnector = (s: WorkflowStep): boolean => {
  const d = stepTypeOf(s)?.describe(s.config);
  return d?.connector !== undefined || (d?.lists ?? []).some((l) => l.steps.some(usesConnector));
};

export interface TestStep extends DryRunNote {
  key: string;
  type: string;
  status: StepRecord['status'];
  reason?: string;
  /** What the step's expressions were evaluated over; null for a step that did not run. */
  input: unknown;
  output: unknown;
  error: string | null;
  /** A switch: the branch that ran (a case's index, or `default`) and its steps. */
  branch?: number | 'default';
  steps?: TestStep[];
  /** A for_each: its items' counts, and the steps of the items shown (as the run record keeps them). */
  items?: StepRecord['items'];
  item_records?: Array<Omit<ItemRecord, 'steps'> & { steps: TestStep[] }>;
  /** An on_failure step. */
  on_failure?: true;
}

export interface TestRunResult {
  id: string;
  /** null: a file of a workflow not saved yet. */
  workflow_id: string | null;
  /** null: an unsaved definition was tested. */
  workflow_version: number | null;
  status: 'succeeded' | 'failed';
  outcome: TestRunOutcome;
  facts_would_write: number;
  error: string | null;
  steps: TestStep[];
}

/**
 * `trace`: the request's span (tracing.ts); the test run's steps and calls are traced under it.
 * `workflowId` null: a workflow_file of a workflow not saved yet (POST workflows/test_run).
 */
export async function testRun(
  deps: TestRunDeps,
  principal: Principal,
  workflowId: string | null,
  input: TestRunInput,
  trace?: TraceSpan,
): Promise<TestRunResult> {
  if (input.workflow_file !== undefined && input.version !== undefined)
    throw invalidAt('/data/attributes/version', 'a test run tests either a saved version or a workflow_file, not both');
  const saved =
    workflowId !== null && isUuid(workflowId) ? await loadTestedVersion(deps.db, principal.workspaceId, workflowId.toLowerCase(), input.version) : undefined;
  if (workflowId !== null && !saved)
    throw new AppError('not_found', input.version === undefined ? 'No workflow with this id' : `No workflow with this id has version ${input.version}`);
  if (workflowId === null && input.workflow_file === undefined)
    throw invalidAt(
      '/data/attributes/workflow_file',
      'workflow_file is required here: the workflow to test, as its file (or test a saved one at workflows/{id}/test_run)',
    );
  const tested = input.workflow_file === undefined ? saved! : await testedFile(deps, principal, saved?.workflow_id ?? null, input.workflow_file);
  const call = input.call ?? 'none';
  // Calling out with a connector's credentials asks what saving such a step asks.
  if (call === 'safe' && [...tested.definition, ...(tested.on_failure ?? [])].some((s) => usesConnector(s))) authorize(principal, 'workflow.save_http_request');
  const release = await testRunSlot(deps, principal.workspaceId);
  try {
    return await testRunIn(deps, tested, call, input, trace);
  } finally {
    release();
  }
}

/**
 * The test run's delivery, as a run records one: its headers through the one redaction rule
 * (triggers/delivery-headers.ts, with the key headers of the workflow's api_key connectors),
 * its id given or read from a delivery-id header. Neither headers nor an id: no delivery,
 * as a schedule's run has none.
 */
function sampleDelivery(input: TestRunInput, secretHeaders: readonly string[]): Pick<ClaimedRun, 'delivery_id' | 'delivery_headers'> {
  if (input.headers === undefined && (input.delivery_id === undefined || input.delivery_id === null)) return { delivery_id: null, delivery_headers: null };
  const headers = input.headers ?? {};
  const lowered: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    const lower = name.toLowerCase();
    if (!Object.hasOwn(lowered, lower)) Object.defineProperty(lowered, lower, { value, enumerable: true, writable: true, configurable: true });
  }
  const id = input.delivery_id ?? deliveryHeader(lowered)?.value ?? null;
  return { delivery_id: id, delivery_headers: deliveryHeaders(lowered, secretHeaders) };
}

async function testRunIn(
  deps: TestRunDeps,
  tested: NonNullable<Awaited<ReturnType<typeof loadTestedVersion>>>,
  call: TestRunCall,
  input: TestRunInput,
  trace: TraceSpan | undefined,
): Promise<TestRunResult> {
  const now = deps.clock();
  const id = uuidv7(now);
  const run: ClaimedRun = {
    id,
    organization_id: tested.organization_id,
    workspace_id: tested.workspace_id,
    workflow_id: tested.workflow_id,
    workflow_version: tested.version,
    trigger_key: input.trigger_key ?? null,
    payload: input.payload as ClaimedRun['payload'],
    attempt: 1,
    // One attempt: a transient failure is shown as the failure it is, not retried.
    max_attempts: 1,
    inserted_at: new Date(now),
    // Facts shown, never stored: the key is not used.
    source_identity: null,
    replay_of: null,
    // The steps' spans hang under the request's own: there is no queued run to carry a context.
    traceparent: null,
    tracestate: null,
    definition: tested.definition,
    on_failure: tested.on_failure ?? [],
    models: tested.models,
    saver: tested.saver,
    state: tested.state ?? null,
    state_key: null,
    ...sampleDelivery(input, tested.secretHeaders),
  };
  if (tested.state_key !== null) {
    // The document of the key the sample gives, as the run a delivery of it would read.
    const delivery = expressionDelivery(run.delivery_id, run.delivery_headers);
    const { key } = await runStateKey(deps.testExpressions, tested.workspace_id, tested.state_key, input.payload, delivery);
    run.state_key = key;
    if (key !== STATE_KEY) run.state = await readWorkflowState(deps.db, { workspaceId: tested.workspace_id }, tested.workflow_id, key!);
  }
  const samples: Record<string, ParkedDelivery> = {};
  for (const [key, d] of Object.entries(input.deliveries ?? {})) {
    const { delivery_id, delivery_headers } = sampleDelivery({ payload: d.payload, headers: d.headers ?? {} }, tested.secretHeaders);
    Object.defineProperty(samples, key, { value: { payload: d.payload, id: delivery_id, headers: delivery_headers }, enumerable: true });
  }
  const dry = dryEffects(call, new Map(), samples);
  const span = trace?.child('workflow.test_run', 'internal', {
    'tributary.workflow.id': tested.workflow_id,
    'tributary.workflow.version': tested.version,
    'tributary.test_run.call': call,
  });
  const env = {
    db: deps.db,
    clock: deps.clock,
    expressions: deps.testExpressions,
    effects: dry,
    trace: span,
    outputMaxBytes: deps.config.runRecord.outputBytes,
    ...(deps.connectors ? { connectors: deps.connectors } : {}),
  };
  let outcome;
  try {
    outcome = await executeRun(env, run, { schedule: [0], retryAfterMaxMs: 0 });
    span?.set({ 'tributary.run.status': outcome.status === 'succeeded' ? 'succeeded' : 'failed' });
  } finally {
    span?.end();
  }
  const records = capSteps(outcome.steps, ANSWER_CAPS);
  const tree = [...tested.definition, ...(tested.on_failure ?? [])];
  const seen: Record<string, unknown> = {};
  /** A record as the answer shows it; `prefix`: the instance prefix of a for_each item's steps (dry notes are by instance). */
  const shown = (r: StepRecord, prefix: string, input: unknown): TestStep => {
    const type = findStep(tree, r.key)?.type ?? 'unknown';
    const note = dry.notes.get(prefix + r.key) ?? {};
    return {
      key: r.key,
      type,
      status: r.status,
      ...(r.reason === undefined ? {} : { reason: r.reason }),
      ...shownInput(input),
      output: r.output,
      ...(r.output_truncated ? { output_truncated: true, output_bytes: r.output_bytes } : {}),
      error: r.error,
      ...(r.value === undefined ? {} : { value: r.value }),
      ...(note.facts ? { ...shownItems('facts', note.facts), ...shownItems('problems', note.problems ?? []) } : {}),
      ...(note.request ? { request: note.request } : {}),
      ...(note.response !== undefined ? { response: note.response } : {}),
      ...('state' in note ? { state: note.state } : {}),
      ...(note.note ? { note: note.note } : {}),
      ...(r.branch === undefined ? {} : { branch: r.branch }),
      // Nested steps are shown without their input: it is their switch's or item's, with the earlier steps of the list.
      ...(r.steps === undefined ? {} : { steps: r.steps.map((c) => shown(c, prefix, null)) }),
      ...(r.items === undefined ? {} : { items: r.items }),
      ...(r.item_records === undefined
        ? {}
        : { item_records: r.item_records.map((it) => ({ ...it, steps: it.steps.map((c) => shown(c, `${prefix}${r.key}[${it.index}].`, null)) })) }),
      ...(r.on_failure ? { on_failure: true as const } : {}),
      ...(note.resume_at ? { resume_at: note.resume_at } : {}),
    };
  };
  const steps = records.map((r, i): TestStep => {
    const ran = r.status !== 'skipped';
    const stepInput = ran ? { ...runContext(run), steps: { ...seen } } : null;
    // What the next step saw: the output, or its preview past RUN_STEP_OUTPUT_MAX_BYTES.
    if (r.status === 'succeeded' && !r.on_failure) seen[r.key] = outcome.steps[i]!.output;
    return shown(r, '', stepInput);
  });
  const failed = outcome.status !== 'succeeded';
  return {
    id,
    workflow_id: tested.workflow_id === FILE_WORKFLOW_ID ? null : tested.workflow_id,
    workflow_version: input.workflow_file === undefined ? tested.version : null,
    status: failed ? 'failed' : 'succeeded',
    // One attempt: a transient failure is as failed as a permanent one here.
    outcome: failed ? 'failed' : outcome.outcome === 'stopped_at_condition' ? 'stopped_at_condition' : 'completed',
    // A real run keeps the facts of the steps before one that failed: they count.
    facts_would_write: outcome.factsWritten,
    error: outcome.error,
    steps,
  };
}

/** The run's workflow id when the file's workflow is not saved yet: no row has it, nothing is written under it. */
const FILE_WORKFLOW_ID = '00000000-0000-7000-8000-000000000000';

const FILE_POINTER = '/data/attributes/workflow_file';

/** A problem of the file, at the workflow_file member, with where in the text it is. */
function fileProblem(detail: string, at: ReadonlyArray<string | number>, position: { line: number; column: number } | undefined, builderPointer?: string) {
  return new AppError('invalid_request', detail, {
    source: { pointer: FILE_POINTER },
    meta: {
      member: memberPath(at),
      ...(position ? { line: position.line, column: position.column } : {}),
      ...(builderPointer === undefined ? {} : { builder_pointer: builderPointer }),
    },
  });
}

/**
 * The file read and checked as its save would be (same shape checks, same references), its
 * errors put back at their member and line; then what the run reads beside its steps.
 */
async function testedFile(deps: TestRunDeps, principal: Principal, workflowId: string | null, text: string): Promise<TestedVersion> {
  let parsed: ParsedWorkflowText;
  try {
    parsed = parseWorkflowText(text);
  } catch (err) {
    if (err instanceof WorkflowFileProblem) throw fileProblem(err.problem, err.at, err.position);
    throw err;
  }
  const parts = builderParts(parsed.file, principal.credentialId);
  const limits: SaveLimits = {
    quotas: deps.config.quotas!,
    scheduleMinIntervalSeconds: deps.config.scheduleMinIntervalSeconds ?? 1,
  };
  let def;
  try {
    def = await checkDefinition(deps.db, principal, { organization_id: principal.organizationId, ...parts }, new Date(deps.clock()), limits);
  } catch (err) {
    const pointer = err instanceof AppError ? err.source?.pointer : undefined;
    const at = pointer === undefined ? undefined : filePathOfPointer(pointer, parsed.file);
    if (!(err instanceof AppError) || at === undefined) throw err;
    throw fileProblem(err.detail, at, parsed.locate(at), pointer);
  }
  const slugs = [...new Set(everyStep(def).flatMap(([s]) => stepTypeOf(s)?.describe(s.config).dataModel ?? []))];
  const connectors = [...new Set(def.triggers.flatMap((t) => (t.type === 'webhook' && t.inbound_connector_id !== null ? [t.inbound_connector_id] : [])))];
  const context = await fileContext(deps.db, principal.workspaceId, slugs, connectors, workflowId);
  return {
    workflow_id: workflowId ?? FILE_WORKFLOW_ID,
    organization_id: principal.organizationId,
    workspace_id: principal.workspaceId,
    version: 0,
    definition: def.steps,
    on_failure: def.onFailure,
    state_key: def.wf.state_key,
    state: context.state ?? null,
    models: context.models,
    // The caller's own standing, as a save would record it: they are the saver of what they test.
    saver: { role: principal.role, is_active: true },
    secretHeaders: context.secretHeaders,
  };
}
