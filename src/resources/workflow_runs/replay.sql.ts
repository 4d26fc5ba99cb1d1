/**
 * Replays in SQL: one run again (insertReplay) and many at once (insertBulkReplay), and the
 * one filter builder that both the JSON:API bulk route and the admin API narrow runs with.
 */
import { sql, type RawBuilder, type Selectable, type SqlBool } from 'kysely';
import type { Db } from '../../db/connect.ts';
import type { WorkflowRunTable } from '../../db/tables.ts';
import { workflowRunType } from './resource.ts';
import { filterClauseSql, type FilterOp } from '../filter.sql.ts';
import { ADVISORY_LOCK } from '../../db/advisory-locks.ts';
import type { StoredTraceContext } from '../../tracing.ts';

/** original: the version the run ran on; current: the workflow's version now. */
export type ReplayVersion = 'original' | 'current';

/** One condition on a filterable attribute of workflow_run, its value already of the attribute's kind (a list for `in`). */
export interface RunFilterClause {
  attr: string;
  op: FilterOp;
  value: unknown;
}

/** The column of a filterable run attribute; anything else is a programming error, never SQL. */
function filterColumn(attr: string): string {
  const def = Object.hasOwn(workflowRunType.attributes, attr) ? workflowRunType.attributes[attr] : undefined;
  if (def === undefined || def.filter !== true) throw new Error(`workflow_run cannot be filtered by ${attr}`);
  return def.column;
}

function clauseSql(c: RunFilterClause): RawBuilder<SqlBool> {
  return filterClauseSql(sql.id('o', filterColumn(c.attr)), c.op, c.value);
}

/** The workflow version a replay runs on: `o` is the original run, `w` its workflow. */
const versionOf = (version: ReplayVersion) => (version === 'current' ? sql`w.version` : sql`o.workflow_version`);

/**
 * A new run of `originalId` with the same payload, trigger, source identity, concurrency key and limit and state key (it is the same delivery's), delivery headers and delivery id
 * (replayed_delivery_id: its expressions see the original's `delivery`), linked to
 * it, on the original's or the workflow's current version; the original must be a run of
 * the workspace. Returns the new row with the original's trace context (`original_traceparent`,
 * `original_tracestate`), or undefined when there is no such run.
 */
export async function insertReplay(
  db: Db,
  workspaceId: string,
  originalId: string,
  id: string,
  now: Date,
  maxAttempts: number,
  version: ReplayVersion,
  trace: StoredTraceContext,
) {
  const result = await sql<Selectable<WorkflowRunTable> & { original_traceparent: string | null; original_tracestate: string | null }>`
    with r as (
      insert into workflow_runs (id, organization_id, workspace_id, workflow_id, workflow_version, trigger_key, delivery_id, payload, max_attempts, replay_of, source_identity, delivery_headers, replayed_delivery_id, traceparent, tracestate, run_at, inserted_at, updated_at, concurrency_key, concurrency_limit, state_key)
      select ${id}, o.organization_id, o.workspace_id, o.workflow_id, ${versionOf(version)}, o.trigger_key, null, o.payload, ${maxAttempts}, o.id, o.source_identity, o.delivery_headers, coalesce(o.delivery_id, o.replayed_delivery_id),
             ${trace.traceparent}, ${trace.tracestate}, ${now}, ${now}, ${now}, o.concurrency_key, o.concurrency_limit, o.state_key
      from workflow_runs as o
      join workflows as w on w.workspace_id = o.workspace_id and w.id = o.workflow_id and w.deleted_at is null
      where o.workspace_id = ${workspaceId} and o.id = ${originalId}
      returning *
    )
    select r.*, o.traceparent as original_traceparent, o.tracestate as original_tracestate from r join workflow_runs as o on o.id = r.replay_of`.execute(db);
  return result.rows[0];
}

export interface BulkReplay {
  /** The workspace whose runs are replayed; null only for the admin API, which acts for every workspace. */
  workspaceId: string | null;
  filter: readonly RunFilterClause[];
  version: ReplayVersion;
  /** At most this many runs are made; `ids` holds that many fresh ids, in order. */
  ids: readonly string[];
  now: Date;
  maxAttempts: number;
  trace: StoredTraceContext;
}

/**
 * Replays, in one statement, the finished runs that match, oldest first, up to ids.length
 * of them. A run that has a replay already is left out: its replay stands for it, so a
 * second call carries on where the first stopped instead of replaying the same runs again.
 * Returns the new runs' ids (in the order of their originals) and whether more matched.
 *
 * Concurrent calls take turns: on PostgreSQL two statements at READ COMMITTED would both
 * see no replay of a run and both make one (a double click replayed every run twice). The
 * transaction first takes the workspace's bulk-replay lock (the admin's replay of every
 * workspace takes them all), so the statement's snapshot, taken after the lock, sees the
 * replays of the call before it, which commits before it lets go. PGlite runs one statement
 * at a time, so the lock costs nothing there.
 */
export async function insertBulkReplay(db: Db, r: BulkReplay): Promise<{ ids: string[]; hasMore: boolean }> {
  return db.transaction().execute(async (trx) => {
    if (r.workspaceId === null) await sql`select pg_advisory_xact_lock(${ADVISORY_LOCK.bulkReplay})`.execute(trx);
    else
      await sql`select pg_advisory_xact_lock_shared(${ADVISORY_LOCK.bulkReplay}), pg_advisory_xact_lock(${ADVISORY_LOCK.bulkReplay}::int, hashtext(${r.workspaceId}))`.execute(
        trx,
      );
    return replayMatching(trx, r);
  });
}

async function replayMatching(db: Db, r: BulkReplay): Promise<{ ids: string[]; hasMore: boolean }> {
  const limit = r.ids.length;
  const conditions = [
    sql<SqlBool>`o.status in ('succeeded', 'failed')`,
    sql<SqlBool>`not exists (select 1 from workflow_runs as p where p.workspace_id = o.workspace_id and p.replay_of = o.id)`,
    // A deleted workflow's runs stay readable, never replayed: they take no place in the page.
    sql<SqlBool>`exists (select 1 from workflows as dw where dw.id = o.workflow_id and dw.deleted_at is null)`,
    ...r.filter.map(clauseSql),
  ];
  if (r.workspaceId !== null) conditions.unshift(sql<SqlBool>`o.workspace_id = ${r.workspaceId}`);
  const result = await sql<{ id: string; matched: number | string }>`
    with matched as (
      select o.id, row_number() over (order by o.inserted_at, o.id) as n
      from workflow_runs as o
      where ${sql.join(conditions, sql` and `)}
      order by o.inserted_at, o.id
      limit ${limit + 1}
    ),
    made as (
      insert into workflow_runs (id, organization_id, workspace_id, workflow_id, workflow_version, trigger_key, delivery_id, payload, max_attempts, replay_of, source_identity, delivery_headers, replayed_delivery_id, traceparent, tracestate, run_at, inserted_at, updated_at, concurrency_key, concurrency_limit, state_key)
      select i.id, o.organization_id, o.workspace_id, o.workflow_id, ${versionOf(r.version)}, o.trigger_key, null, o.payload, ${r.maxAttempts}, o.id, o.source_identity, o.delivery_headers, coalesce(o.delivery_id, o.replayed_delivery_id),
             ${r.trace.traceparent}, ${r.trace.tracestate}, ${r.now}, ${r.now}, ${r.now}, o.concurrency_key, o.concurrency_limit, o.state_key
      from matched as m
      join unnest(${[...r.ids]}::uuid[]) with ordinality as i (id, n) on i.n = m.n
      join workflow_runs as o on o.id = m.id
      join workflows as w on w.workspace_id = o.workspace_id and w.id = o.workflow_id and w.deleted_at is null
      returning id, replay_of
    )
    select made.id, (select count(*) from matched) as matched from made join matched as m on m.id = made.replay_of order by m.n`.execute(db);
  const matched = Number(result.rows[0]?.matched ?? 0);
  return { ids: result.rows.map((row) => row.id), hasMore: matched > limit };
}

/** Whether the run of the workspace is there, of a deleted workflow: why a replay of it made nothing. */
export async function isRunOfDeletedWorkflow(db: Db, workspaceId: string, runId: string): Promise<boolean> {
  const { rows } = await sql`
    select 1 from workflow_runs as r join workflows as w on w.id = r.workflow_id
    where r.workspace_id = ${workspaceId} and r.id = ${runId} and w.deleted_at is not null`.execute(db);
  return rows.length > 0;
}
