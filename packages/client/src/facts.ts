/**
 * Every fact a factQuery matches, page after page, through factQuery itself (what any client
 * may call). factQuery pages by offset, which gets slower the deeper it goes, and clamps a
 * timeline window to 366 days; so the pages here go by keyset instead: sorted oldest first
 * on the axis (ties by id), the next page starts at `since` = the last fact's instant, and
 * `offset` skips only the facts already read at that very instant (usually none). A
 * timeline is read window after window of at most 366 days; without `since` it starts at
 * the model's earliest fact, found by bisection with one-row "as of" probes.
 */
import type { FactExportVariables, FactFilterClause } from './types.ts';

/** One fact as the export reads it: factQuery's Fact with `data` parsed. */
export interface Fact {
  id: string;
  dataModelId: string;
  entityId: string | null;
  /** ISO 8601, UTC, milliseconds. */
  observedAt: string;
  insertedAt: string;
  data: Record<string, unknown>;
}

interface RawFact {
  id: string;
  dataModelId: string;
  entityId: string | null;
  observedAt: string;
  insertedAt: string;
  data: string;
}

export type FactQueryCall = (query: string, variables: Record<string, unknown>) => Promise<{ factQuery: { results: RawFact[] | null } | null }>;

/** factQuery's largest page and longest timeline window (schema.graphql). */
export const MAX_PAGE_SIZE = 250;
const DAY_MS = 86_400_000;
export const MAX_WINDOW_MS = 366 * DAY_MS;
/** The earliest instant a DateTime names. */
const MIN_MS = Date.parse('0001-01-01T00:00:00.000Z');

const PAGE_QUERY = `query FactPage($dataModelSlug: String!, $mode: String, $timeAxis: String, $since: DateTime, $until: DateTime, $filters: String, $sort: String, $sortDirection: String, $limit: Int, $offset: Int, $joinDataModelSlug: String, $joinType: String, $joinFilters: String) {
  factQuery(dataModelSlug: $dataModelSlug, mode: $mode, timeAxis: $timeAxis, since: $since, until: $until, filters: $filters, sort: $sort, sortDirection: $sortDirection, limit: $limit, offset: $offset, joinDataModelSlug: $joinDataModelSlug, joinType: $joinType, joinFilters: $joinFilters) {
    results { id dataModelId entityId observedAt insertedAt data }
  }
}`;

/** Whether any fact lies at or before `until` on the axis: the newest one as of then, if any. */
const PROBE_QUERY = `query FactProbe($dataModelSlug: String!, $timeAxis: String, $until: DateTime) {
  factQuery(dataModelSlug: $dataModelSlug, mode: "latest", timeAxis: $timeAxis, until: $until, sortDirection: "desc", limit: 1) { results { id } }
}`;

const iso = (ms: number) => new Date(ms).toISOString();

function instant(value: string | undefined, name: string): number | undefined {
  if (value === undefined) return undefined;
  const ms = Date.parse(value);
  if (Number.isNaN(ms)) throw new TypeError(`${name} must be an ISO 8601 date-time, not ${JSON.stringify(value)}`);
  return ms;
}

const clauses = (f: string | ReadonlyArray<FactFilterClause> | undefined) => (f === undefined || typeof f === 'string' ? f : JSON.stringify(f));

function parsed(r: RawFact): Fact {
  return {
    id: r.id,
    dataModelId: r.dataModelId,
    entityId: r.entityId,
    observedAt: r.observedAt,
    insertedAt: r.insertedAt,
    data: JSON.parse(r.data) as Fact['data'],
  };
}

/**
 * The pages of facts matching `v`, oldest first on the axis (latest mode: by observedAt).
 * `now` is the end of a timeline without `until`, read once: facts stored after the export
 * started are not in it.
 */
export async function* factPages(call: FactQueryCall, v: FactExportVariables, now: () => number): AsyncGenerator<Fact[]> {
  const mode = v.mode ?? 'latest';
  const axis = v.timeAxis ?? 'observed_at';
  const limit = v.pageSize ?? MAX_PAGE_SIZE;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE_SIZE) throw new RangeError(`pageSize must be an integer from 1 to ${MAX_PAGE_SIZE}`);
  const since = instant(v.since, 'since');
  const until = instant(v.until, 'until');
  const base: Record<string, unknown> = {
    dataModelSlug: v.dataModelSlug,
    mode,
    timeAxis: axis,
    filters: clauses(v.filters),
    sortDirection: 'asc',
    limit,
  };
  if (v.joinDataModelSlug !== undefined)
    Object.assign(base, { joinDataModelSlug: v.joinDataModelSlug, joinType: v.joinType, joinFilters: clauses(v.joinFilters) });
  const page = async (vars: Record<string, unknown>) => ((await call(PAGE_QUERY, { ...base, ...vars })).factQuery?.results ?? []).map(parsed);

  if (mode === 'latest') {
    // The latest rows are ordered by observedAt; `since` bounds the axis. Only when the two
    // are one column can `since` be the cursor; on inserted_at the pages go by offset.
    const at = (f: Fact) => Date.parse(f.observedAt);
    if (axis !== 'observed_at') {
      for (let offset = 0; ; offset += limit) {
        const facts = await page({ sort: 'observed_at', since: v.since, until: v.until, offset });
        if (facts.length > 0) yield facts;
        if (facts.length < limit) return;
      }
    }
    yield* keyset(page, at, since ?? MIN_MS, { sort: 'observed_at', until: v.until }, limit);
    return;
  }

  const end = until ?? now();
  const start = since ?? (await earliest(call, v.dataModelSlug, axis, end));
  if (start === undefined) return;
  const at = (f: Fact) => Date.parse(axis === 'observed_at' ? f.observedAt : f.insertedAt);
  for (let from = start; from < end; from = Math.min(end, from + MAX_WINDOW_MS)) {
    const to = iso(Math.min(end, from + MAX_WINDOW_MS));
    yield* keyset(page, at, from, { sort: axis, until: to }, limit);
  }
}

/**
 * Pages sorted ascending by `at` then id, from `from` on: each next page starts at the last
 * fact's instant, skipping the facts of that instant already read (they come first, in id order).
 */
async function* keyset(
  page: (vars: Record<string, unknown>) => Promise<Fact[]>,
  at: (f: Fact) => number,
  from: number,
  vars: Record<string, unknown>,
  limit: number,
): AsyncGenerator<Fact[]> {
  let cursor = from;
  let seen = 0;
  for (;;) {
    const facts = await page({ ...vars, since: iso(cursor), offset: seen });
    if (facts.length > 0) yield facts;
    if (facts.length < limit) return;
    const last = at(facts[facts.length - 1]!);
    let tied = 0;
    for (let i = facts.length - 1; i >= 0 && at(facts[i]!) === last; i--) tied++;
    seen = last === cursor ? seen + tied : tied;
    cursor = last;
  }
}

/**
 * The start of a day before which the model has no fact (on the axis), or undefined when it
 * has none up to `end`: bisection over days with probes of "the newest fact as of T", each
 * one row read from an index. About 20 probes from year 1 to now.
 */
async function earliest(call: FactQueryCall, slug: string, axis: string, end: number): Promise<number | undefined> {
  const any = async (ms: number) => ((await call(PROBE_QUERY, { dataModelSlug: slug, timeAxis: axis, until: iso(ms) })).factQuery?.results ?? []).length > 0;
  if (!(await any(end))) return undefined;
  if (await any(MIN_MS)) return MIN_MS;
  // none at or before lo; some at or before hi.
  let lo = MIN_MS;
  let hi = end;
  while (hi - lo > DAY_MS) {
    const mid = lo + Math.floor((hi - lo) / 2);
    if (await any(mid)) hi = mid;
    else lo = mid;
  }
  return lo;
}
