/**
 * Bulk replay: the finished runs that match a filter run again, up to BULK_REPLAY_MAX per
 * call, made in one statement. The JSON:API route parses its filter[...] parameters into
 * clauses; the admin API builds the same clauses from its body (adminBulkReplay).
 */
import type { Deps } from '../../deps.ts';
import { parseDateTime } from '../../datetime.ts';
import { AppError, invalidAt } from '../../errors.ts';
import { isUuid, uuidv7 } from '../../ids.ts';
import { isObject } from '../../json.ts';
import { wakeWorkers } from '../../runs/wake.ts';
import { insertBulkReplay, type ReplayVersion, type RunFilterClause } from './replay.sql.ts';
import { RUN_OUTCOMES } from './resource.ts';
import { storedContext, type TraceSpan } from '../../tracing.ts';
import { checkWaitingRuns } from '../../quotas/quotas.ts';

export type { ReplayVersion, RunFilterClause } from './replay.sql.ts';

export const REPLAY_VERSIONS: readonly ReplayVersion[] = ['original', 'current'];
/** The most runs one bulk replay makes; has_more says when more matched. */
export const BULK_REPLAY_MAX = 1000;
/** Only these are replayed: a queued, running or retrying run has not finished yet. */
const FINISHED = ['succeeded', 'failed'] as const;

export function readReplayVersion(value: unknown, pointer: string): ReplayVersion {
  if (value === undefined) return 'original';
  if (!(REPLAY_VERSIONS as readonly unknown[]).includes(value)) throw invalidAt(pointer, 'version must be "original" or "current"');
  return value as ReplayVersion;
}

export function readReplayLimit(value: unknown, pointer: string): number {
  if (value === undefined) return BULK_REPLAY_MAX;
  if (!Number.isInteger(value) || (value as number) < 1 || (value as number) > BULK_REPLAY_MAX)
    throw invalidAt(pointer, `limit must be a whole number from 1 to ${BULK_REPLAY_MAX}`);
  return value as number;
}

export interface BulkReplayResult {
  replayed: number;
  has_more: boolean;
  run_ids: string[];
}

/**
 * Replays the matching finished runs of the workspace (null: every workspace, for the
 * admin), oldest first. `filter` must not be empty: the callers say so in their own terms.
 */
export async function bulkReplay(
  deps: Deps,
  workspaceId: string | null,
  filter: readonly RunFilterClause[],
  opts: { version: ReplayVersion; limit: number },
  trace?: TraceSpan,
): Promise<BulkReplayResult> {
  if (filter.length === 0) throw new AppError('invalid_request', 'A bulk replay needs at least one filter');
  // Checked before, not counted per run: a bulk replay may take the workspace past its limit by its own limit at most (docs/configuration.md).
  if (workspaceId !== null) await checkWaitingRuns(deps, workspaceId);
  const now = new Date(deps.clock());
  const ids = Array.from({ length: opts.limit }, () => uuidv7(now.getTime()));
  // Every new run continues the request's trace; the originals' traces are not linked (up to BULK_REPLAY_MAX of them).
  const made = await insertBulkReplay(deps.db, {
    workspaceId,
    filter,
    version: opts.version,
    ids,
    now,
    maxAttempts: deps.config.runMaxAttempts,
    trace: storedContext(trace),
  });
  trace?.set({ 'tributary.replay.runs': made.ids.length });
  if (made.ids.length > 0) wakeWorkers(deps);
  return { replayed: made.ids.length, has_more: made.hasMore, run_ids: made.ids };
}

const ADMIN_FILTERS = ['workflow_id', 'status', 'outcome', 'trigger_key', 'since', 'until'] as const;
const ADMIN_MEMBERS: readonly string[] = [...ADMIN_FILTERS, 'workspace_id', 'version', 'limit'];
const DURATION_MS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** An ISO 8601 date or date-time with a zone, or a duration such as `2h` (that long before now). */
function readTime(value: unknown, pointer: string, now: number): Date {
  const duration = typeof value === 'string' ? /^(\d{1,6})([smhd])$/.exec(value) : null;
  if (duration) return new Date(now - Number(duration[1]) * DURATION_MS[duration[2]!]!);
  const date = typeof value === 'string' ? parseDateTime(value, { dateOnly: true }) : undefined;
  if (date === undefined) throw invalidAt(pointer, `${pointer.slice(1)} must be an ISO 8601 date-time with a zone, or a duration such as 2h, 30m or 7d`);
  return date;
}

function oneOf(value: unknown, pointer: string, values: readonly string[]): string {
  if (typeof value !== 'string' || !values.includes(value)) throw invalidAt(pointer, `${pointer.slice(1)} must be one of ${values.join(', ')}`);
  return value;
}

/**
 * The admin API's bulk replay (`tributary runs replay --status ...`): its body names the
 * filters as members, and `since`/`until` bound inserted_at (since inclusive, until not).
 */
export async function adminBulkReplay(deps: Deps, body: Record<string, unknown>, trace?: TraceSpan): Promise<BulkReplayResult> {
  for (const k of Object.keys(body))
    if (!ADMIN_MEMBERS.includes(k)) throw invalidAt(`/${k}`, `unknown member ${k}; a replay takes ${ADMIN_MEMBERS.join(', ')}`);
  for (const k of ['workspace_id', 'workflow_id'] as const) if (body[k] !== undefined && !isUuid(body[k])) throw invalidAt(`/${k}`, `${k} must be an id`);
  const now = deps.clock();
  const filter: RunFilterClause[] = [];
  if (body.workflow_id !== undefined) filter.push({ attr: 'workflow_id', op: 'eq', value: (body.workflow_id as string).toLowerCase() });
  if (body.status !== undefined) filter.push({ attr: 'status', op: 'eq', value: oneOf(body.status, '/status', FINISHED) });
  if (body.outcome !== undefined) filter.push({ attr: 'outcome', op: 'eq', value: oneOf(body.outcome, '/outcome', RUN_OUTCOMES) });
  if (body.trigger_key !== undefined) {
    if (typeof body.trigger_key !== 'string' || body.trigger_key === '' || body.trigger_key.length > 1024)
      throw invalidAt('/trigger_key', 'trigger_key must be a non-empty string');
    filter.push({ attr: 'trigger_key', op: 'eq', value: body.trigger_key });
  }
  const since = body.since === undefined ? undefined : readTime(body.since, '/since', now);
  const until = body.until === undefined ? undefined : readTime(body.until, '/until', now);
  if (since && until && since.getTime() > until.getTime()) throw invalidAt('/until', 'until must not be before since');
  if (since) filter.push({ attr: 'inserted_at', op: 'gte', value: since });
  if (until) filter.push({ attr: 'inserted_at', op: 'lt', value: until });
  if (filter.length === 0)
    throw invalidAt('', `A bulk replay needs at least one filter (${ADMIN_FILTERS.join(', ')}), so that a whole workspace is never replayed by accident`);
  const workspaceId = body.workspace_id === undefined ? null : (body.workspace_id as string).toLowerCase();
  return bulkReplay(deps, workspaceId, filter, { version: readReplayVersion(body.version, '/version'), limit: readReplayLimit(body.limit, '/limit') }, trace);
}

/** The admin API's replay of one run: its body may name the version. */
export function adminReplayVersion(body: Record<string, unknown>): ReplayVersion {
  for (const k of Object.keys(body)) if (k !== 'version') throw invalidAt(`/${k}`, `unknown member ${k}; a replay of one run takes version`);
  return readReplayVersion(body.version, '/version');
}

/**
 * The JSON:API replays' optional body, `{"meta": {"version": ..., "limit": ...}}` (limit
 * only for the bulk replay). Anything else is refused rather than silently ignored.
 */
export function readReplayMeta(body: unknown, bulk: boolean): { version: ReplayVersion; limit: number } {
  const members = bulk ? ['version', 'limit'] : ['version'];
  if (body === undefined) return { version: 'original', limit: BULK_REPLAY_MAX };
  if (!isObject(body)) throw invalidAt('', `The body, if any, must be a document {"meta": {${members.map((m) => `"${m}"`).join(', ')}}}`);
  for (const k of Object.keys(body))
    if (k !== 'meta') throw invalidAt(`/${k}`, `A replay takes only meta (${members.join(', ')}); it runs the original payload again`);
  const meta = body.meta ?? {};
  if (!isObject(meta)) throw invalidAt('/meta', `meta must be an object with ${members.join(', ')}`);
  for (const k of Object.keys(meta)) if (!members.includes(k)) throw invalidAt(`/meta/${k}`, `unknown member ${k}; meta takes ${members.join(', ')}`);
  return { version: readReplayVersion(meta.version, '/meta/version'), limit: readReplayLimit(meta.limit, '/meta/limit') };
}
