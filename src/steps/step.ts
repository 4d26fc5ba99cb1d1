/**
 * One interface for every step type (docs/architecture.md, "Adding a step type"). A step
 * type checks its config when a workflow is saved, runs it against the run's context and
 * an `Effects` (effects.ts: the real one in a run, the dry one in a test run), and says
 * what it reads and touches, for the save's checks, test runs and the console.
 *
 * A step fails permanently on what a retry cannot change (an expression error, a fact
 * that does not fit its data model) and transiently on what it can (the database not
 * answering): it throws a WorkFailure (errors.ts), and the run retries with backoff.
 */
import type { Db } from '../db/connect.ts';
import type { Role, StepRecord, WorkflowRunTable, WorkflowStep } from '../db/tables.ts';
import type { DataModelWithFields } from '../facts/models.sql.ts';
import type { Selectable } from 'kysely';
import type { ConnectorRow } from '../connectors/connectors.sql.ts';
import type { ConnectorRuntime } from '../connectors/runtime.ts';
import { permanentFailure, WorkFailure } from '../errors.ts';
import { ExpressionError, ExpressionPoolError } from '../expressions/expressions.ts';
import type { ExpressionJob, ExpressionPool } from '../expressions/expression-pool.ts';
import type { TraceSpan } from '../tracing.ts';
import type { ExpressionDelivery } from '../triggers/delivery-headers.ts';
import type { Effects, ParkedDelivery } from './effects.ts';

/** A problem with a step's config at save: its JSON pointer under the config ('' is the config itself). */
export interface Issue {
  pointer: string;
  detail: string;
}

export type Checked<Config> = { ok: true; config: Config } | { ok: false; issues: Issue[] };

/** What a step reads of its run (a claimed run, runs/queue.sql.ts, has it all; so has a test run's). */
export type StepRun = Pick<
  Selectable<WorkflowRunTable>,
  'id' | 'organization_id' | 'workspace_id' | 'workflow_id' | 'workflow_version' | 'source_identity' | 'inserted_at'
> & {
  /** The key of the state document the run writes (null or absent: ''; a test run writes none). */
  state_key?: string | null;
  /** The data models its write_fact steps name, as they are at the claim. */
  models: DataModelWithFields[];
  /** The membership that saved the version's steps, as it stands at the claim (none: not recorded, or gone). */
  saver: { role: Role; is_active: boolean } | null;
  /** The versions of the connectors its http_request steps name, as they are at the claim (see ClaimedRun). */
  connector_versions?: Record<string, string> | null;
};

/** What every expression of a run sees. */
export interface Context {
  payload: unknown;
  steps: Record<string, unknown>;
  run: { id: string; attempt: number };
  trigger: { key: string | null };
  delivery: ExpressionDelivery | null;
  /** Inside a for_each item: the item and its index (0-based). */
  item?: unknown;
  index?: number;
  /** In on_failure steps: the step that failed (its key) and its error. */
  failure?: { step: string; error: string };
  /** The workflow's state document (docs/workflows.md, "Workflow state"): as at the attempt's claim, then as set_state steps set it; null before any. */
  state: unknown;
}

/** What a nested list of steps (a switch's branch, a for_each item) ended as. */
export interface ListResult {
  /** The output of its last step that ran (null when none did). */
  output: unknown;
  /** A false condition stopped the list (the rest of it skipped): why. */
  stopped?: string;
}

/**
 * The executor's walk, for the steps that hold steps (switch, for_each): runs a nested
 * list with its records appended to `into`, checkpointed by step instance. A failing step
 * throws (its record is in `into` already); a lost lease throws too.
 */
export interface NestedWalk {
  list(
    steps: readonly WorkflowStep[],
    opts: {
      into: StepRecord[];
      /** What the list's expressions see: a copy of the context, with `item` and `index` for an item. */
      input: Context;
      /** Prefix of the instance names of its steps: '' in a branch, `<key>[<index>].` in an item. */
      prefix: string;
      span?: TraceSpan | undefined;
    },
  ): Promise<ListResult>;
  /** Drops what the checkpoint keeps of the steps under `prefix` (an item's, once the for_each keeps its result). */
  forget(prefix: string): void;
  /** The most records of finished items the for_each's record keeps (ITEM_RECORDS_SHOWN). */
  readonly itemRecordsShown: number;
}

/** What one attempt reads once however many steps use it: connectors by id, and whether the version's saver may still call out. */
export interface AttemptReads {
  connectors: Map<string, ConnectorRow | undefined>;
  saverMay?: boolean;
}

/** What a step runs with besides its config and the effects. */
export interface StepContext {
  db: Db;
  run: StepRun;
  /** The step's key. */
  key: string;
  /** What its expressions see (the outputs of the steps before it). */
  input: Context;
  expressions: ExpressionPool;
  /** Outbound calls' runtime (rate budgets, the connector cache); absent where no step calls out. */
  connectors?: ConnectorRuntime | undefined;
  reads: AttemptReads;
  /** The step's span; undefined when tracing is off. */
  span: TraceSpan | undefined;
  /**
   * The step's instance: its key, inside a for_each item `<for_each key>[<index>].<key>`
   * (facts' source keys and calls' idempotency keys are made of it, so each item has its own).
   */
  instance?: string;
  /** What this step saved in an earlier attempt (undefined if none). */
  progress?: unknown;
  /** Saves the step's progress and checkpoints now, fenced by the lease; false: the lease was lost, stop. Absent in a test run. */
  saveProgress?: (p: unknown) => Promise<boolean>;
  /** Keeps the step's progress with the next checkpoint (or the attempt's outcome), without writing now. */
  noteProgress?: (p: unknown) => void;
  /** Members the step adds to its own record (a switch's branch, a for_each's items), filled as it runs, kept on failure too. */
  record?: Partial<StepRecord>;
  /** The executor's walk of nested steps; absent where steps cannot nest. */
  nested?: NestedWalk;
  /** The run's clock (deps.clock): what a wait measures its time on. */
  clock: () => number;
  /** The cap of one step's output as JSON (RUN_STEP_OUTPUT_MAX_BYTES): what a step that collects outputs keeps with its progress. */
  outputMaxBytes?: number;
  /**
   * Set when the run resumes the step it parked on (see Park): what the step saved then, and
   * for a wait_for_delivery the delivery that matched it (absent: its time came first).
   */
  parked?: { state: unknown; delivery?: ParkedDelivery | undefined } | undefined;
}

export type { ParkedDelivery } from './effects.ts';

/**
 * A step that waits parks its run (docs/workflows.md, "Waits"): the executor stops, records
 * the steps done and `state` in the checkpoint, and releases the run, holding no worker slot,
 * lease or connection, until `resumeAt` (or, with `delivery`, a delivery on that trigger whose
 * `match` is true, whichever comes first). Any worker then runs the step again with
 * StepContext.parked, and it gives its output (or parks again).
 */
export interface Park {
  resumeAt: Date;
  state: unknown;
  delivery?: { trigger: string; match: string | null };
}

/** What a step gave. */
export interface StepResult {
  output: unknown;
  /** Kept on the step's record beside the output (a condition's value before truthiness). */
  value?: unknown;
  /** The run stops after this step, a success (a false condition): the rest are skipped for this reason. */
  stop?: { reason: string };
  /** Facts stored by the step, for the run's count. */
  factsWritten?: number;
  /** The step waits: the run parks, and the step runs again at resumeAt (or when a delivery matches). */
  park?: Park;
  /** The state document the step set: the later steps of the run see it as `state`. */
  state?: { value: unknown };
  /** `output` is already its preview (a for_each whose collected outputs passed the cap): the full output's size as JSON. */
  outputCut?: { bytes: number };
}

/** What a step reads and touches, from its config alone. */
export interface StepDescription {
  /** Its expressions, each with its pointer under the config (for the step-reference check at save). */
  expressions: Array<[pointer: string, expression: string]>;
  /** The data model it writes facts of. */
  dataModel?: string;
  /** The outbound connector it calls out through. */
  connector?: string;
  /**
   * The lists of steps it holds, each with its pointer under the config: a switch's branches
   * (`branch`: one of them runs) or a for_each's item steps (`item`: they run once per item).
   */
  lists?: Array<{ pointer: string; steps: WorkflowStep[]; kind: 'branch' | 'item' }>;
}

export interface StepType<Config> {
  readonly type: string;
  /**
   * When a success is recorded (docs/workflows.md, "Durable steps"): `now`, before the next
   * step starts, for a side effect a retry must not repeat (a call out); `with-next`, with the
   * next checkpoint or the attempt's outcome, for a step that is safe to run again (pure, or
   * at most once by itself, as write_fact).
   */
  readonly checkpoint: 'now' | 'with-next';
  /** The step may park the run (a wait): not allowed inside a for_each item. */
  readonly parks?: boolean;
  /** The config's shape and expressions, at save (what needs the database is checked by the save). */
  validate(config: Record<string, unknown>): Checked<Config>;
  run(config: Config, ctx: StepContext, effects: Effects): Promise<StepResult>;
  describe(config: Config): StepDescription;
}

/** A step's expressions, evaluated in one job of the pool (see ExpressionPool.run). */
export async function evaluate(ctx: Pick<StepContext, 'expressions' | 'run'>, job: Omit<ExpressionJob, 'workspace'>): Promise<unknown[][]> {
  try {
    // The workspace: the pool serves waiting work round-robin by it.
    return await ctx.expressions.run({ ...job, workspace: ctx.run.workspace_id });
  } catch (err) {
    if (err instanceof ExpressionError) throw permanentFailure(err.message);
    // The pool's own trouble (closing at shutdown, a process lost to an outside signal): another attempt can succeed.
    if (err instanceof ExpressionPoolError) throw new WorkFailure(err.message, { transient: true, cause: err });
    throw err;
  }
}

export const evaluateOne = async (ctx: Pick<StepContext, 'expressions' | 'run' | 'input'>, expression: string): Promise<unknown> =>
  (await evaluate(ctx, { input: ctx.input, expressions: [expression] }))[0]![0];
