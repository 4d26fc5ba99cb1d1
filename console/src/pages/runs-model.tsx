/**
 * What the Runs pages share: the shape of a run as the API answers it, the list's filters
 * as they live in the address (`#/runs?status=failed&workflow=ID`) and as the API takes them.
 */
import { href } from '../router.ts';
import { Badge } from '../ui/index.tsx';

export interface StepRecord {
  key: string;
  status: string;
  started_at: string | null;
  finished_at: string | null;
  output: unknown;
  error: string | null;
  output_truncated?: boolean;
  output_bytes?: number;
  reason?: string;
  value?: unknown;
  /** The attempt whose result is shown, and how many attempts ran the step (absent: skipped, or recorded before they were kept). */
  attempt?: number;
  attempts?: number;
  /** A switch: the case that ran (its index), or `default`; and the records of the branch's steps. */
  branch?: number | 'default';
  steps?: StepRecord[];
  /** A for_each: how its items ended, and the records of some of them (docs/workflows.md, "Records of nested steps"). */
  items?: { count: number; succeeded: number; stopped: number; failed: number; not_run: number };
  item_records?: ItemRecord[];
  /** A step of the workflow's on_failure list. */
  on_failure?: true;
}

export interface ItemRecord {
  index: number;
  status: string;
  reason?: string;
  steps: StepRecord[];
}

export interface RunAttributes {
  status: string;
  outcome: string | null;
  attempt: number;
  max_attempts: number;
  workflow_id: string;
  workflow_version: number;
  trigger_key: string | null;
  delivery_id: string | null;
  payload: unknown;
  payload_truncated?: boolean;
  payload_bytes?: number;
  /** Absent on a server without it; null for a run no delivery made (a schedule's). */
  delivery_headers?: Record<string, string> | null;
  steps: StepRecord[];
  error: string | null;
  replay_of: string | null;
  facts_written: number;
  /** The trace of the run's spans (docs/tracing.md); null when tracing was off, absent on a server without it. */
  trace_id?: string | null;
  /** The key computed when the run was enqueued, and its limit; null: not limited (absent on a server without it). */
  concurrency_key?: string | null;
  concurrency_limit?: number | null;
  inserted_at: string;
  updated_at: string;
  started_at: string | null;
  finished_at: string | null;
  /** A waiting run: the latest instant it resumes (null otherwise; absent on a server without waits). */
  resume_at?: string | null;
}

export interface Run {
  type: string;
  id: string;
  attributes: RunAttributes;
}

export interface Included {
  type: string;
  id: string;
  attributes?: { name?: string; version?: number; steps?: unknown };
}

export interface RunList {
  data: Run[];
  included?: Included[];
  links?: { next?: string | null; prev?: string | null };
  meta?: { page?: { total?: number } };
}

export const RUN_STATUSES = ['queued', 'running', 'retrying', 'waiting', 'succeeded', 'failed', 'cancelled'] as const;
export const RUN_OUTCOMES = ['completed', 'stopped_at_condition', 'failed', 'dead_letter', 'cancelled'] as const;
export const UNFINISHED: ReadonlySet<string> = new Set(['queued', 'running', 'retrying', 'waiting']);
/** What POST /workflow_runs/{id}/cancel takes: a running run is refused (its attempt ends first). */
export const CANCELLABLE: ReadonlySet<string> = new Set(['queued', 'retrying', 'waiting']);

/** The list's filters, by their names in the address. */
export interface RunFilters {
  workflow?: string | undefined;
  status?: string | undefined;
  outcome?: string | undefined;
  trigger?: string | undefined;
  /** ISO 8601 instants: inserted_at from (inclusive) and until (inclusive). */
  from?: string | undefined;
  until?: string | undefined;
}

export const FILTER_KEYS = ['workflow', 'status', 'outcome', 'trigger', 'from', 'until'] as const;

export function filtersFromQuery(q: URLSearchParams): RunFilters {
  const f: RunFilters = {};
  for (const k of FILTER_KEYS) {
    const v = q.get(k)?.trim();
    if (v) f[k] = v;
  }
  return f;
}

export function hasFilter(f: RunFilters): boolean {
  return FILTER_KEYS.some((k) => f[k] !== undefined);
}

/** The list's address with these filters: what a person copies to share the view. */
export function runsHref(f: RunFilters): string {
  return href('runs', { ...f });
}

/** The filters as the SDK takes them (bulkReplay): the same names the list uses. */
export function sdkFilter(f: RunFilters): Record<string, string | Record<string, string>> {
  const out: Record<string, string | Record<string, string>> = {};
  if (f.workflow) out.workflow_id = f.workflow;
  if (f.status) out.status = f.status;
  if (f.outcome) out.outcome = f.outcome;
  if (f.trigger) out.trigger_key = f.trigger;
  const range: Record<string, string> = {};
  if (f.from) range.gte = f.from;
  if (f.until) range.lte = f.until;
  if (range.gte || range.lte) out.inserted_at = range;
  return out;
}

/** The filters as JSON:API query parameters (`filter[status]=failed`), `omit` left out. */
export function apiParams(f: RunFilters, omit: ReadonlyArray<keyof RunFilters> = []): URLSearchParams {
  const q = new URLSearchParams();
  for (const [field, cond] of Object.entries(sdkFilter(Object.fromEntries(Object.entries(f).filter(([k]) => !omit.includes(k as keyof RunFilters)))))) {
    if (typeof cond === 'string') q.append(`filter[${field}]`, cond);
    else for (const [op, v] of Object.entries(cond)) q.append(`filter[${field}][${op}]`, v);
  }
  return q;
}

/** A link of a list answer (an absolute URL or a path) as a path on our own server. */
export function linkPath(link: string | null | undefined): string | undefined {
  if (!link) return undefined;
  const u = new URL(link, location.origin);
  return `${u.pathname}${u.search}`;
}

/** A run's short name: the end of its id (a UUIDv7 starts with its time, the same for runs made together). */
export const shortId = (id: string) => id.slice(id.lastIndexOf('-') + 1);

export function workflowNames(doc: { included?: Included[] | undefined }, into: Map<string, string> = new Map()): Map<string, string> {
  for (const r of doc.included ?? []) if (r.type === 'workflow' && r.attributes?.name) into.set(r.id, r.attributes.name);
  return into;
}

export function formatBytes(n: number | undefined): string {
  if (n === undefined) return 'unknown size';
  if (n < 1024) return `${n} bytes`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

/** Newest first, as the list sorts (inserted_at, then id, both descending). */
export function byInsertedDesc(a: Run, b: Run): number {
  const x = a.attributes.inserted_at;
  const y = b.attributes.inserted_at;
  if (x !== y) return x < y ? 1 : -1;
  return a.id < b.id ? 1 : a.id > b.id ? -1 : 0;
}

/** A run's link, named by its whole id for a screen reader, its short one on screen. */
export function RunLink(props: { id: string }) {
  return (
    <a href={href('runs', props.id)} class="mono" aria-label={`Run ${props.id}`} title={props.id}>
      {shortId(props.id)}
    </a>
  );
}

/** Status, and the outcome when it says more. */
export function RunBadges(props: { run: Run }) {
  const a = props.run.attributes;
  return (
    <span class="badges">
      <Badge value={a.status} />
      {a.outcome && a.outcome !== a.status && <Badge value={a.outcome} />}
      {a.replay_of && <span class="muted small">replay</span>}
    </span>
  );
}

/** A run's or a step's error text, as the record keeps it (cut at its size with a marker). */
export function ErrorText(props: { text: string | null | undefined }) {
  if (!props.text) return null;
  return (
    <div class="notice error">
      <strong>Error</strong>
      <p class="pre-wrap">{props.text}</p>
    </div>
  );
}
