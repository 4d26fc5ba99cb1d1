/**
 * The runs list, kept live: one page loaded with the list's filters, then every 750 ms while
 * the tab is visible the same filters with `filter[updated_at][gt]` ask what changed since.
 * New runs go to the top of the first page, changed ones replace theirs in place.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import type { TributaryClient } from '@tributary/client';
import { apiParams, byInsertedDesc, linkPath, UNFINISHED, workflowNames, type Run, type RunFilters, type RunList } from './runs-model.tsx';

export const POLL_MS = 750;
export const PAGE_LIMIT = 25;
/** Changes asked for per request; a catch-up after the tab was hidden follows links.next. */
const POLL_LIMIT = 100;
const POLL_PAGES = 10;
/**
 * updated_at is stamped before its transaction commits, so a run can become visible with
 * an updated_at older than one already seen. Asking again for a short while back keeps such
 * a run from being missed; a run seen twice is merged as one.
 */
const OVERLAP_MS = 2000;

export interface LiveRuns {
  rows: Run[];
  names: Map<string, string>;
  next?: string | undefined;
  prev?: string | undefined;
  loading: boolean;
  error: unknown;
  pollError: unknown;
  /** How many runs the last polls added, for the polite announcement. */
  arrived: number;
}

function since(iso: string): string {
  return new Date(Date.parse(iso) - OVERLAP_MS).toISOString();
}

function newest(runs: readonly Run[], than?: string): string | undefined {
  let max = than;
  for (const r of runs) if (max === undefined || r.attributes.updated_at > max) max = r.attributes.updated_at;
  return max;
}

/** Every change since `after` (the filters' and the cursor's), following links.next a few pages. */
async function changes(client: TributaryClient, params: URLSearchParams, after: string | undefined): Promise<RunList> {
  const q = new URLSearchParams(params);
  if (after !== undefined) q.set('filter[updated_at][gt]', since(after));
  q.set('sort', 'updated_at');
  q.set('page[limit]', String(POLL_LIMIT));
  q.set('include', 'workflow');
  let doc = (await client.request('GET', `/workflow_runs?${q}`)) as RunList;
  const all: RunList = { data: [...doc.data], included: [...(doc.included ?? [])] };
  for (let i = 1; i < POLL_PAGES && doc.data.length === POLL_LIMIT; i++) {
    const next = linkPath(doc.links?.next);
    if (!next) break;
    doc = (await client.request('GET', next)) as RunList;
    all.data.push(...doc.data);
    all.included!.push(...(doc.included ?? []));
  }
  return all;
}

/** Changed runs replace theirs; new ones join a first page at their place (newest first). */
export function mergeRuns(
  rows: Run[],
  incoming: readonly Run[],
  opts: { firstPage: boolean; lastPage: boolean; addNew: boolean },
): { rows: Run[]; added: number } {
  const byId = new Map(rows.map((r) => [r.id, r]));
  const oldest = rows.length > 0 ? rows[rows.length - 1]!.attributes.inserted_at : undefined;
  let changed = false;
  let added = 0;
  for (const r of incoming) {
    const shown = byId.get(r.id);
    if (shown) {
      if (shown.attributes.updated_at !== r.attributes.updated_at) {
        byId.set(r.id, r);
        changed = true;
      }
    } else if (opts.addNew && opts.firstPage && (opts.lastPage || oldest === undefined || r.attributes.inserted_at >= oldest)) {
      byId.set(r.id, r);
      changed = true;
      added++;
    }
  }
  return { rows: changed ? [...byId.values()].sort(byInsertedDesc) : rows, added };
}

export function useLiveRuns(client: TributaryClient, filters: RunFilters, filtersKey: string, pagePath: string | undefined): LiveRuns {
  const [state, setState] = useState<LiveRuns>({ rows: [], names: new Map(), loading: true, error: undefined, pollError: undefined, arrived: 0 });
  const current = useRef(state);
  current.current = state;

  useEffect(() => {
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let busy = false;
    const params = apiParams(filters);
    // Runs leave a status or outcome filter when they finish; the filter would no longer
    // return them, so the shown unfinished ones are asked for without it.
    const movable = filters.status !== undefined || filters.outcome !== undefined;
    const wideParams = apiParams(filters, ['status', 'outcome']);
    const firstPage = pagePath === undefined;
    let cursor: string | undefined;
    let wideCursor: string | undefined;
    let lastPage = true;

    setState((s) => ({ ...s, loading: true, error: undefined }));
    const load = async (arrived = 0) => {
      const q = new URLSearchParams(params);
      q.set('include', 'workflow');
      q.set('page[limit]', String(PAGE_LIMIT));
      const doc = (await client.request('GET', pagePath ?? `/workflow_runs?${q}`)) as RunList;
      if (stopped) return;
      // A reload keeps what was seen: the cursor only moves forward.
      cursor = newest(doc.data, cursor);
      wideCursor = newest(doc.data, wideCursor);
      lastPage = !doc.links?.next;
      setState({
        rows: doc.data,
        names: workflowNames(doc),
        next: linkPath(doc.links?.next),
        prev: linkPath(doc.links?.prev),
        loading: false,
        error: undefined,
        pollError: undefined,
        arrived,
      });
    };

    const poll = async () => {
      const found = await changes(client, params, cursor);
      let wide: RunList = { data: [] };
      const unfinished = current.current.rows.filter((r) => UNFINISHED.has(r.attributes.status));
      if (movable && unfinished.length > 0) {
        const q = new URLSearchParams(wideParams);
        const earliest = unfinished.reduce((m, r) => (r.attributes.inserted_at < m ? r.attributes.inserted_at : m), unfinished[0]!.attributes.inserted_at);
        q.set('filter[inserted_at][gte]', earliest);
        wide = await changes(client, q, wideCursor);
      }
      if (stopped) return;
      cursor = newest(found.data, cursor);
      wideCursor = newest(wide.data, wideCursor ?? cursor);
      const s = current.current;
      const a = mergeRuns(s.rows, found.data, { firstPage, lastPage, addNew: true });
      const b = mergeRuns(a.rows, wide.data, { firstPage, lastPage, addNew: false });
      // A first page that outgrew its size is read again: the newest runs, and links.next past them.
      if (firstPage && b.rows.length > PAGE_LIMIT) return load(a.added);
      const names = workflowNames(wide, workflowNames(found, new Map(s.names)));
      if (b.rows === s.rows && s.pollError === undefined && names.size === s.names.size) return;
      setState({ ...s, rows: b.rows, names, pollError: undefined, arrived: a.added > 0 ? a.added : s.arrived });
    };

    const schedule = () => {
      if (stopped || timer !== undefined || busy || document.visibilityState !== 'visible') return;
      timer = setTimeout(tick, POLL_MS);
    };
    const tick = async () => {
      timer = undefined;
      if (stopped || document.visibilityState !== 'visible') return;
      busy = true;
      try {
        await poll();
      } catch (pollError) {
        if (!stopped) setState((s) => ({ ...s, pollError }));
      } finally {
        busy = false;
        schedule();
      }
    };
    // Hidden: no requests. Shown again: catch up at once, then every POLL_MS.
    const onVisibility = () => {
      if (document.visibilityState !== 'visible') {
        clearTimeout(timer);
        timer = undefined;
      } else if (!busy && timer === undefined) void tick();
    };

    load().then(schedule, (error: unknown) => {
      if (!stopped) setState((s) => ({ ...s, loading: false, error }));
    });
    document.addEventListener('visibilitychange', onVisibility);
    return () => {
      stopped = true;
      clearTimeout(timer);
      document.removeEventListener('visibilitychange', onVisibility);
    };
    // filtersKey stands for `filters`: the list is remade exactly when they change.
  }, [client, filtersKey, pagePath]);

  return state;
}
