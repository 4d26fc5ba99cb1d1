/**
 * What steps do to the world, behind one interface: a run's real effects, and a test run's
 * dry ones that show what would have been done (worker/test-run.ts). The steps themselves
 * hold no test-run branch: they compute, and hand what they would store or send here.
 */
import type { Db } from '../db/connect.ts';
import type { ConnectorRow } from '../connectors/connectors.sql.ts';
import { connectorCall, previewCall, type CallParts, type CallTarget, type RequestPreview } from '../connectors/call.ts';
import type { ConnectorRuntime } from '../connectors/runtime.ts';
import { permanentFailure } from '../errors.ts';
import { cutText } from '../runs/run-record.ts';
import { uuidv7 } from '../ids.ts';
import type { FactModel, ValidFact } from '../facts/validate.ts';
import { storeValidFacts, type FactStore } from '../facts/write.ts';
import type { Metrics } from '../metrics.ts';
import type { TraceSpan } from '../tracing.ts';
import { runStateKeyOf, writeWorkflowState } from '../runs/state.sql.ts';
import type { ParkedDelivery } from '../runs/waits.sql.ts';

/**
 * The facts of one write_fact step, each validated once (facts/validate.ts) by the step:
 * stored all together, or, with a refusal, none (the step then fails with it).
 */
export interface FactsToStore {
  key: string;
  run: { organization_id: string; workspace_id: string };
  model: FactModel;
  /** Every item as the step made it: as it would be stored when valid (instant and datetimes normalized, its entity), else as given. */
  items: NonNullable<DryRunNote['facts']>;
  /** The valid items, to store. */
  facts: ValidFact[];
  /** Every problem of the items, at its pointer. */
  problems: NonNullable<DryRunNote['problems']>;
  /** Why nothing is stored: the step's error. */
  refusal?: string | undefined;
}

/** A call a step would make through a connector. */
export interface CallToMake {
  key: string;
  runtime: ConnectorRuntime;
  row: ConnectorRow;
  target: CallTarget;
  idempotencyKey: string;
}

/** A call's answer as a step's output: status, headers (never set-cookie), body. */
export type CallOutput = { status: number; headers: Record<string, unknown>; body: unknown } | null;

export interface Effects {
  storeFacts(what: FactsToStore): Promise<{ written: number; duplicates: number }>;
  /**
   * Checks the call's target against the connector (throwing before any expression is
   * evaluated, as it should), then gives the sender of its parts.
   */
  callOut(call: CallToMake): (parts: CallParts, span: TraceSpan | undefined) => Promise<CallOutput>;
  /**
   * A wait (delay, wait_until, wait_for_delivery): `park` in a run, which the step then asks
   * of the executor (steps/step.ts Park); in a test run, not parked, with the sample delivery
   * the test run was given for the step (none: as if the timeout came first).
   */
  wait(w: WaitToMake): Promise<WaitAnswer>;
  /** Sets the workflow's state document (set_state), `json` its value as JSON within the step's cap. */
  setState(what: StateToSet): Promise<void>;
  /** The most pages a paged call fetches here besides its own max_pages (a test run's few); absent: no more limit. */
  readonly pageLimit?: number;
}

export type { ParkedDelivery };

export type WaitKind = 'delay' | 'wait_until' | 'wait_for_delivery';

export interface WaitToMake {
  key: string;
  kind: WaitKind;
  /** When the wait ends at the latest (a wait_for_delivery's timeout). */
  until: Date;
  delivery?: { trigger: string; match: string | null };
}

export type WaitAnswer = { park: true } | { park: false; delivery?: ParkedDelivery | undefined };

export interface StateToSet {
  key: string;
  /** `state_key`: the key of the run's document (null or absent: ''). */
  run: { id: string; workspace_id: string; workflow_id: string; state_key?: string | null };
  value: unknown;
  json: string;
}

/** How many pages a test run's paged call fetches at most (call "safe"): enough to show the paging, not a sync. */
export const TEST_RUN_PAGES = 3;

const answer = (res: { status: number; headers: Record<string, unknown>; body: unknown }): NonNullable<CallOutput> => {
  const { 'set-cookie': _cookie, ...headers } = res.headers;
  return { status: res.status, headers, body: res.body };
};

export interface RealEffectsEnv {
  db: Db;
  clock: () => number;
  metrics?: Pick<Metrics, 'factsWritten'> | undefined;
  /** The worker's fact writer (batches concurrent runs); one statement per step when absent. */
  store?: FactStore | undefined;
}

/** A run's effects: facts stored, calls sent. */
export function realEffects(env: RealEffectsEnv): Effects {
  return {
    async storeFacts({ run, model, facts, refusal }) {
      if (refusal !== undefined) throw permanentFailure(refusal);
      const r = await storeValidFacts(env.db, { organizationId: run.organization_id, workspaceId: run.workspace_id }, model, facts, env.metrics, env.store);
      return { written: r.written, duplicates: r.duplicates };
    },
    callOut({ runtime, row, target, idempotencyKey }) {
      const send = connectorCall(runtime, row, target, idempotencyKey);
      return async (parts, span) => answer(await send(parts, span));
    },
    wait: async () => ({ park: true }),
    async setState({ run, json }) {
      // A deleted workflow's run writes nothing: its state went with it.
      const now = env.clock();
      await writeWorkflowState(env.db, { workspaceId: run.workspace_id }, run.workflow_id, runStateKeyOf(run), run.id, json, new Date(now), uuidv7(now));
    },
  };
}

/** What a test run shows of a step beside its output. */
export interface DryRunNote {
  facts?: Array<{ observed_at: unknown; data: unknown; entity_id?: string | null }>;
  problems?: Array<{ item?: number; pointer: string; detail: string }>;
  request?: RequestPreview;
  response?: unknown;
  /** Why the step's output is what it is in a test run (a call not made, a wait not waited). */
  note?: string;
  /** A wait: when the run would resume at the latest (a wait_for_delivery's timeout). */
  resume_at?: string;
  /** A set_state step: the document it would have set. */
  state?: unknown;
}

/** Methods a test run may send with `call: "safe"`: they read, they do not change the provider's state. */
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * A test run's effects: facts shown as they would be stored, never stored; a request shown,
 * and sent only when `call` is safe and its method reads (without taking the rate budget).
 * What each step would have done is in `notes`, by step key.
 */
export function dryEffects(
  call: 'none' | 'safe',
  notes: Map<string, DryRunNote>,
  deliveries: Readonly<Record<string, ParkedDelivery>> = {},
): Effects & { notes: Map<string, DryRunNote> } {
  return {
    notes,
    async storeFacts({ key, items, facts, problems, refusal }) {
      // Shown before it says why nothing would be stored: the would-be facts and every problem.
      notes.set(key, { facts: items, problems });
      if (refusal !== undefined) throw permanentFailure(refusal);
      return { written: facts.length, duplicates: 0 };
    },
    callOut({ key, runtime, row, target, idempotencyKey }) {
      // The same check of the target a run makes, before any expression is evaluated.
      connectorCall(runtime, row, target, idempotencyKey);
      const preview = previewCall(runtime, row, target, idempotencyKey);
      return async (parts, span) => {
        const { request, send } = await preview(parts);
        const note: DryRunNote = { request };
        notes.set(key, note);
        if (call !== 'safe' || send === undefined || !SAFE_METHODS.has(request.method ?? '')) {
          note.note =
            call !== 'safe'
              ? 'Not sent (call is "none"): the output is null, and the next steps see null'
              : `Not sent: only GET, HEAD and OPTIONS calls of an http connector are made in a test run; the output is null, and the next steps see null`;
          return null;
        }
        const res = answer(await send(span));
        note.response = res;
        return res;
      };
    },
    async wait({ key, until, delivery }) {
      // A test run does not wait: it says until when the run would, and goes on.
      const resume_at = until.toISOString();
      if (delivery === undefined) {
        notes.set(key, { resume_at, note: `Would wait until ${resume_at}; a test run goes on at once` });
        return { park: false };
      }
      const sample = Object.hasOwn(deliveries, key) ? deliveries[key] : undefined;
      notes.set(key, {
        resume_at,
        note:
          sample === undefined
            ? `Would wait for a delivery on trigger ${delivery.trigger} until ${resume_at}; no sample was given in deliveries.${key}, so the test run goes on as if the timeout came first`
            : `Would wait for a delivery on trigger ${delivery.trigger} until ${resume_at}; the test run goes on with the sample of deliveries.${key}`,
      });
      return { park: false, delivery: sample };
    },
    async setState({ key, value }) {
      notes.set(key, { state: value, note: `Not written (a test run): would set the state to ${cutText(JSON.stringify(value), 512)}` });
    },
    pageLimit: TEST_RUN_PAGES,
  };
}
