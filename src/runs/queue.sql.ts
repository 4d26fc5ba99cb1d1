/**
 * The run queue on our own tables: a run row is its job. Workers claim ready runs with
 * FOR UPDATE SKIP LOCKED (two workers never claim one run, and neither waits for the
 * other), hold them under a lease that a heartbeat extends, and finish them only while
 * they still hold the lease. A run whose lease ran out (its worker died or lost the
 * database) is made ready again by reclaimExpired, or failed when its attempts are spent.
 */
import { sql, type Selectable } from 'kysely';
import type { Db } from '../db/connect.ts';
import type { Role, RunCheckpoint, RunOutcome, RunStatus, StepRecord, WorkflowRunTable, WorkflowStep } from '../db/tables.ts';
import { modelsJson, type DataModelWithFields } from '../facts/models.sql.ts';
import { CLAIM_CONNECTOR_VERSIONS } from '../connectors/connectors.sql.ts';
import type { ParkedDelivery } from './waits.sql.ts';
import { RUN_STATE } from './state.sql.ts';
import { ADVISORY_LOCK } from '../db/advisory-locks.ts';

type ClaimedColumns =
  | 'id'
  | 'organization_id'
  | 'workspace_id'
  | 'workflow_id'
  | 'workflow_version'
  | 'trigger_key'
  | 'payload'
  | 'attempt'
  | 'max_attempts'
  | 'inserted_at'
  | 'source_identity'
  | 'replay_of'
  | 'traceparent'
  | 'tracestate'
  | 'delivery_headers'
  | 'state_key';

/** The run row's columns the worker reads, and its version's steps. */
export type ClaimedRun = Pick<Selectable<WorkflowRunTable>, ClaimedColumns> & {
  /** The id of the delivery its expressions see: the run's delivery_id, or a replay's replayed_delivery_id; null for a schedule's. */
  delivery_id: string | null;
  /** The version's stored steps, typed as read: each was checked for its type by workflows/definition.ts before it was saved. */
  definition: WorkflowStep[];
  /** The version's on_failure steps (absent: none, as for a version saved before them). */
  on_failure?: WorkflowStep[];
  /** The data models its write_fact steps name, as they are at the claim. */
  models: DataModelWithFields[];
  /** The membership that saved the version's steps, as it stands at the claim (none: not recorded, or gone). */
  saver: { role: Role; is_active: boolean } | null;
  /**
   * The versions of the connectors its http_request steps name, as they are at the claim (null:
   * none exists; absent: not read, as in a test run): a worker's kept connector is used only at
   * the same version (connector-cache.ts), so a change committed before the claim is always seen.
   */
  connector_versions?: Record<string, string> | null;
  /** What its earlier attempts recorded as done (null: nothing yet; absent: a test run, which resumes nothing). */
  checkpoint?: RunCheckpoint | null;
  /** A run resumed from a wait_for_delivery by a delivery: that delivery (run_waits.delivery); null or absent otherwise. */
  wait_delivery?: ParkedDelivery | null;
  /** The workflow's state document of the run's key (state_key) at the claim (runs/state.sql.ts); null: never set. */
  state?: unknown;
};

// Who saved the version, read in the claim: steps that call out check it at every attempt without a statement of their own.
const SAVER = sql`(select json_build_object('role', m.role, 'is_active', m.is_active) from org_memberships as m
  where m.id = v.saved_by_membership_id and m.organization_id = r.organization_id)`;

/**
 * Every step of a version, nested ones (a switch's branches, a for_each's steps) and its
 * on_failure steps included: strict `.**` reaches every object of the tree once, and only
 * steps have a `type` member beside a `config` one.
 */
export const VERSION_STEPS = sql`jsonb_path_query(jsonb_build_array(v.steps, coalesce(v.on_failure, '[]'::jsonb)), 'strict $.** ? (exists(@.type) && exists(@.config))')`;

// The models a version's write_fact steps name, read in the claim: no statement per step.
const STEP_MODELS = modelsJson(sql`r.workspace_id`, sql`select s->'config'->>'data_model_slug' from ${VERSION_STEPS} as s where s->>'type' = 'write_fact'`);

// The delivery that matched a parked wait_for_delivery, read in the claim (only for a run parked on a step).
const WAIT_DELIVERY = sql`(case when r.checkpoint ? 'parked' then (select w.delivery from run_waits as w where w.run_id = r.id) end)`;

/** Where a claim's rotation over the workspaces starts at first: before every uuid. */
export const FIRST_WORKSPACE = '00000000-0000-0000-0000-000000000000';

/** Where a claim's rotation over the concurrency keys is (claimKeyed): after this key of this workflow. */
export interface KeyCursor {
  workflowId: string;
  key: string;
}

/** Where the rotation over the keys starts at first: before every key. */
export const FIRST_KEY: KeyCursor = { workflowId: FIRST_WORKSPACE, key: '' };

/** What the worker keeps between claims for the runs that have a concurrency key. */
export interface KeyedState {
  /** Where the next keyed claim's rotation starts. */
  after: KeyCursor;
  /** Keyed runs were ready at the last look: the next claim tries them (a claim without them costs no statement of its own). */
  ready: boolean;
  /** Which of the two claims goes first, turn about, so that neither the keyed runs nor the others wait on the other's backlog. */
  keyedFirst: boolean;
}

export const FIRST_KEYED: KeyedState = { after: FIRST_KEY, ready: true, keyedFirst: true };

export interface ClaimBatch {
  runs: ClaimedRun[];
  /** Some workspace got its whole share: more may be ready right now. */
  more: boolean;
  /** Where the next claim's rotation starts: the last workspace this one served. */
  after: string;
  /** The keyed claims' state for the next claim. */
  keyed: KeyedState;
}

const CLAIM_RETURNING = sql`r.id, r.organization_id, r.workspace_id, r.workflow_id, r.workflow_version, r.trigger_key, r.payload,
  r.attempt, r.max_attempts, r.inserted_at, r.source_identity, r.replay_of, r.traceparent, r.tracestate,
  coalesce(r.delivery_id, r.replayed_delivery_id) as delivery_id, r.delivery_headers, v.steps as definition, ${STEP_MODELS} as models, ${SAVER} as saver,
  ${CLAIM_CONNECTOR_VERSIONS} as connector_versions, r.checkpoint, v.on_failure, ${WAIT_DELIVERY} as wait_delivery, ${RUN_STATE} as state, r.state_key`;

/** A claim counts an attempt, except a run resuming a wait: waiting spends none (docs/workflows.md, "Waits"). */
const ATTEMPT_AT_CLAIM = sql`case when r.status = 'waiting' then r.attempt else r.attempt + 1 end`;

/**
 * A claim of up to `limit` ready runs: those without a concurrency key by the fair claim
 * (claimUnkeyed), those with one by claimKeyed, each given the first half of the slots in
 * turn and the other the rest, so neither kind's backlog holds back the other. claimKeyed
 * is tried only when the previous claim saw keyed runs ready: without any, a claim is the
 * one statement it was.
 */
export async function claimBatch(
  db: Db,
  workerId: string,
  limit: number,
  now: Date,
  leaseUntil: Date,
  after = FIRST_WORKSPACE,
  keyed: KeyedState = FIRST_KEYED,
): Promise<ClaimBatch> {
  const keyedFirst = keyed.ready && keyed.keyedFirst;
  let runs: ClaimedRun[] = [];
  let more = false;
  let next: KeyedState = { ...keyed, keyedFirst: !keyed.keyedFirst };
  const tryKeyed = async (n: number) => {
    if (n <= 0 || !keyed.ready) return;
    const k = await claimKeyed(db, workerId, n, now, leaseUntil, keyed.after);
    runs = runs.concat(k.runs);
    more ||= k.runs.length >= n;
    next = { ...next, after: k.after };
  };
  if (keyedFirst) await tryKeyed(Math.ceil(limit / 2));
  const rest = keyedFirst ? limit - runs.length : keyed.ready ? Math.ceil(limit / 2) : limit;
  const u = rest > 0 ? await claimUnkeyed(db, workerId, rest, now, leaseUntil, after) : undefined;
  if (u !== undefined) {
    runs = runs.concat(u.runs);
    more ||= u.more;
    next = { ...next, ready: u.keyedReady };
  }
  if (!keyedFirst) await tryKeyed(limit - runs.length);
  return { runs, more, after: u?.after ?? after, keyed: next };
}

/**
 * A fair claim of up to `limit` ready runs without a concurrency key: queued and retrying runs
 * whose time has come, and waiting ones whose wait is over (a resumed wait keeps its attempt:
 * waiting spends none). The workspaces with
 * runs in the queue are found by a skip scan of workflow_runs_ready_unkeyed_idx (one probe per
 * workspace, however long its queue), and each is asked for a run whose time has come as a
 * range of that index (workspace, run_at): so the runs parked for later, however many, are
 * never read (bench/parked.ts: a scan with run_at in its filter read every one). The ready
 * ones are taken in rotation from the one after `after` (at most
 * `limit` of them), and each gives its oldest floor(limit / workspaces) runs, FOR UPDATE SKIP
 * LOCKED (two workers never claim one run, and neither waits for the other). So one
 * workspace's backlog delays another workspace's new run by at most one claim, and a claim
 * reads at most `limit` runs whatever the backlog. When more workspaces are ready than
 * `limit`, the rotation serves the rest at the next claims. The same statement looks (one
 * probe) whether runs with a key are ready, for the next claim.
 */
async function claimUnkeyed(
  db: Db,
  workerId: string,
  limit: number,
  now: Date,
  leaseUntil: Date,
  after: string,
): Promise<{ runs: ClaimedRun[]; more: boolean; after: string; keyedReady: boolean }> {
  type Row = (ClaimedRun & { claim_share: number; keyed_ready: boolean }) | { id: null; keyed_ready: boolean };
  const { rows } = await sql<Row>`
    with recursive pending(workspace_id) as (
      (select workspace_id from workflow_runs
       where status in ('queued', 'retrying', 'waiting') and concurrency_key is null
       order by workspace_id limit 1)
      union all
      select (select q.workspace_id from workflow_runs as q
              where q.status in ('queued', 'retrying', 'waiting') and q.concurrency_key is null and q.workspace_id > pending.workspace_id
              order by q.workspace_id limit 1)
      from pending where pending.workspace_id is not null
    ), ready as (
      select p.workspace_id from pending as p
      where p.workspace_id is not null and exists (
        select 1 from workflow_runs as q
        where q.workspace_id = p.workspace_id and q.status in ('queued', 'retrying', 'waiting') and q.concurrency_key is null and q.run_at <= ${now})
    ), picked as (
      select workspace_id from ready
      order by workspace_id <= ${after}::uuid, workspace_id
      limit ${limit}
    ), share as (
      select greatest(1, ${limit}::int / greatest(count(*), 1)::int) as n from picked
    ), claim as (
      select c.id from picked as p cross join lateral (
        select q.id from workflow_runs as q
        where q.workspace_id = p.workspace_id and q.status in ('queued', 'retrying', 'waiting') and q.concurrency_key is null and q.run_at <= ${now}
        order by q.run_at, q.id
        limit (select n from share)
        for update skip locked
      ) as c
    ), claimed as (
      update workflow_runs as r
      set status = 'running', attempt = ${ATTEMPT_AT_CLAIM}, resume_at = null, locked_by = ${workerId}, locked_until = ${leaseUntil},
          started_at = coalesce(r.started_at, ${now}), updated_at = ${now}
      from workflow_versions as v, share
      where r.id in (select id from claim)
        and v.workflow_id = r.workflow_id and v.version = r.workflow_version
      returning ${CLAIM_RETURNING}, share.n as claim_share
    )
    select c.*, k.keyed_ready from (
      select exists (select 1 from workflow_runs where status in ('queued', 'retrying', 'waiting') and concurrency_key is not null and run_at <= ${now}) as keyed_ready
    ) as k left join claimed as c on true`.execute(db);
  const keyedReady = rows[0]?.keyed_ready === true;
  const claimed = rows.filter((r): r is ClaimedRun & { claim_share: number; keyed_ready: boolean } => r.id !== null);
  const perWorkspace = new Map<string, number>();
  for (const r of claimed) perWorkspace.set(r.workspace_id, (perWorkspace.get(r.workspace_id) ?? 0) + 1);
  const share = claimed[0]?.claim_share ?? 0;
  const more = [...perWorkspace.values()].some((n) => n >= share);
  // The last served in rotation order: those after `after` come before those at or before it.
  const served = [...perWorkspace.keys()].sort((a, b) => Number(a <= after) - Number(b <= after) || (a < b ? -1 : a > b ? 1 : 0));
  const runs = claimed.map(({ claim_share: _, keyed_ready: _k, ...run }) => run as ClaimedRun);
  return { runs, more: claimed.length > 0 && more, after: served.at(-1) ?? after, keyedReady };
}

/**
 * The runs of a key that hold a place in its order: queued, retrying (a retry waiting out its
 * backoff keeps its turn), and waiting runs whose wait is over. A run parked in a wait holds
 * neither a slot nor a place until then.
 */
const IN_KEY_ORDER = (t: 'h' | 'q', now: Date) =>
  sql`(${sql.ref(`${t}.status`)} in ('queued', 'retrying') or (${sql.ref(`${t}.status`)} = 'waiting' and ${sql.ref(`${t}.run_at`)} <= ${now}))`;

/** Keys a keyed claim looks at, at most: its rotation goes on from the last of them at the next claim. */
const KEYS_PER_CLAIM = 64;

/**
 * Keys with ready runs, in rotation after `after` (workflow id, then key), at most `n`, by a
 * skip scan of workflow_runs_keyed_queued_idx (one probe per key, however long its backlog).
 * Each says whether it has a free slot (fewer runs running than the limit of its next run),
 * and those that have are locked for this transaction, unless another claim holds them.
 */
async function readyKeys(trx: Db, now: Date, after: KeyCursor, n: number): Promise<Array<KeyCursor & { locked: boolean }>> {
  const { rows } = await sql<{ workflow_id: string; key: string; locked: boolean }>`
    with recursive k(workflow_id, key) as (
      (select q.workflow_id, q.concurrency_key from workflow_runs as q
       where q.status in ('queued', 'retrying', 'waiting') and q.concurrency_key is not null and q.run_at <= ${now}
         and (q.workflow_id, q.concurrency_key) > (${after.workflowId}::uuid, ${after.key}::text)
       order by q.workflow_id, q.concurrency_key limit 1)
      union all
      select n.workflow_id, n.key from k cross join lateral (
        select q.workflow_id, q.concurrency_key as key from workflow_runs as q
        where q.status in ('queued', 'retrying', 'waiting') and q.concurrency_key is not null and q.run_at <= ${now}
          and (q.workflow_id, q.concurrency_key) > (k.workflow_id, k.key)
        order by q.workflow_id, q.concurrency_key limit 1
      ) as n
    ), visited as (
      select k.workflow_id, k.key,
        (select count(*) from workflow_runs as r where r.workflow_id = k.workflow_id and r.concurrency_key = k.key and r.status = 'running') <
        (select coalesce(h.concurrency_limit, 1) from workflow_runs as h
         where h.workflow_id = k.workflow_id and h.concurrency_key = k.key and ${IN_KEY_ORDER('h', now)}
         order by h.inserted_at, h.id limit 1) as free
      from (select * from k limit ${n}) as k
    )
    select workflow_id, key,
      case when free then pg_try_advisory_xact_lock(${ADVISORY_LOCK.concurrencyKey}::int, hashtext(workflow_id::text || ':' || key)) else false end as locked
    from visited`.execute(trx);
  return rows.map((r) => ({ workflowId: r.workflow_id, key: r.key, locked: r.locked }));
}

/**
 * A claim of up to `limit` ready runs that have a concurrency key: at most `limit` of a key
 * (its runs' concurrency_limit) execute at once, across every worker process, and a key's
 * runs start in the order they were enqueued. Keys are served in rotation (Hatchet's
 * GROUP_ROUND_ROBIN): a claim looks at the next KEYS_PER_CLAIM keys with ready runs after
 * the last one looked at, so one key's backlog delays another key's run by its turn only.
 *
 * Race-free: each key is claimed under its advisory lock (tried: a key another claim holds
 * is left to it), and the claim's statement, which counts the key's running runs, starts
 * after the lock is taken, so its snapshot sees every claim of the key committed before.
 * Held runs are never claimed, so they spend no attempt. A run's place: a run may start
 * while the key's running runs and its runs enqueued before it that still wait (ready or
 * retrying later) are fewer than its limit, so a retry waiting out its backoff keeps its
 * turn. Runs that are not running (waiting in a step, finished) hold no slot; a run whose
 * lease ran out holds its slot until the lease is reclaimed.
 */
export async function claimKeyed(
  db: Db,
  workerId: string,
  limit: number,
  now: Date,
  leaseUntil: Date,
  after: KeyCursor = FIRST_KEY,
): Promise<{ runs: ClaimedRun[]; after: KeyCursor }> {
  return db.transaction().execute(async (trx) => {
    let keys = await readyKeys(trx, now, after, KEYS_PER_CLAIM);
    // The rotation came to its end: it goes on from the first key, up to the ones just looked at.
    if (keys.length < KEYS_PER_CLAIM && (after.workflowId !== FIRST_KEY.workflowId || after.key !== FIRST_KEY.key)) {
      const seen = new Set(keys.map((k) => `${k.workflowId}:${k.key}`));
      const wrapped = (await readyKeys(trx, now, FIRST_KEY, KEYS_PER_CLAIM - keys.length)).filter((k) => !seen.has(`${k.workflowId}:${k.key}`));
      keys = keys.concat(wrapped);
    }
    const last = keys.at(-1);
    const nextAfter = last === undefined ? FIRST_KEY : { workflowId: last.workflowId, key: last.key };
    const locked = keys.filter((k) => k.locked);
    if (locked.length === 0) return { runs: [], after: nextAfter };
    const perKey = Math.max(1, Math.ceil(limit / locked.length));
    const { rows } = await sql<ClaimedRun>`
      with k as (
        select * from unnest(${locked.map((k) => k.workflowId)}::uuid[], ${locked.map((k) => k.key)}::text[]) with ordinality as k(workflow_id, key, turn)
      ), cand as (
        select c.id, k.turn, c.pos from k
        cross join lateral (
          select count(*)::int as n from workflow_runs as r
          where r.workflow_id = k.workflow_id and r.concurrency_key = k.key and r.status = 'running'
        ) as running
        cross join lateral (
          select o.id, o.run_at, o.concurrency_limit, row_number() over (order by o.inserted_at, o.id) as pos
          from (
            select q.id, q.run_at, q.concurrency_limit, q.inserted_at from workflow_runs as q
            where q.workflow_id = k.workflow_id and q.concurrency_key = k.key and ${IN_KEY_ORDER('q', now)}
            order by q.inserted_at, q.id
            limit ${perKey}
          ) as o
        ) as c
        where c.run_at <= ${now} and running.n + c.pos <= coalesce(c.concurrency_limit, 1)
        order by k.turn, c.pos
        limit ${limit}
      ), claim as (
        select q.id from workflow_runs as q
        where q.id in (select id from cand) and q.status in ('queued', 'retrying', 'waiting')
        for update skip locked
      )
      update workflow_runs as r
      set status = 'running', attempt = ${ATTEMPT_AT_CLAIM}, resume_at = null, locked_by = ${workerId}, locked_until = ${leaseUntil},
          started_at = coalesce(r.started_at, ${now}), updated_at = ${now}
      from workflow_versions as v
      where r.id in (select id from claim)
        and v.workflow_id = r.workflow_id and v.version = r.workflow_version
      returning ${CLAIM_RETURNING}`.execute(trx);
    return { runs: rows, after: nextAfter };
  });
}

/**
 * Runs held back by their concurrency key now, by workspace (the metric
 * tributary_runs_held_by_concurrency): ready, with a key, and not claimable because the
 * key's running runs and the runs before them fill its limit. An operator's view over every
 * workspace, as queueGauges; it reads each key's first runs only, bounded by `maxKeys`.
 */
export async function heldByConcurrency(db: Db, now: Date, maxKeys = 10_000): Promise<Map<string, number>> {
  const { rows } = await sql<{ workspace_id: string; held: number }>`
    with recursive k(workflow_id, key) as (
      (select q.workflow_id, q.concurrency_key from workflow_runs as q
       where q.status in ('queued', 'retrying') and q.concurrency_key is not null
       order by q.workflow_id, q.concurrency_key limit 1)
      union all
      select n.workflow_id, n.key from k cross join lateral (
        select q.workflow_id, q.concurrency_key as key from workflow_runs as q
        where q.status in ('queued', 'retrying') and q.concurrency_key is not null and (q.workflow_id, q.concurrency_key) > (k.workflow_id, k.key)
        order by q.workflow_id, q.concurrency_key limit 1
      ) as n
    ), per_key as (
      select w.workspace_id, k.workflow_id, k.key,
        (select count(*) from workflow_runs as r where r.workflow_id = k.workflow_id and r.concurrency_key = k.key and r.status = 'running')::int as running,
        (select count(*) from workflow_runs as q where q.workflow_id = k.workflow_id and q.concurrency_key = k.key
           and q.status in ('queued', 'retrying') and q.run_at <= ${now})::int as ready,
        (select coalesce(h.concurrency_limit, 1) from workflow_runs as h where h.workflow_id = k.workflow_id and h.concurrency_key = k.key
           and h.status in ('queued', 'retrying') order by h.inserted_at, h.id limit 1) as lim
      from (select * from k limit ${maxKeys}) as k join workflows as w on w.id = k.workflow_id
    )
    select workspace_id, sum(greatest(0, ready - greatest(0, lim - running)))::int as held from per_key group by workspace_id`.execute(db);
  return new Map(rows.map((r) => [r.workspace_id, r.held]));
}

/** A fair claim (claimBatch) from the first workspace on. */
export async function claimRuns(db: Db, workerId: string, limit: number, now: Date, leaseUntil: Date): Promise<ClaimedRun[]> {
  return (await claimBatch(db, workerId, limit, now, leaseUntil)).runs;
}

/** Extends the lease of the runs this worker still holds. */
export async function heartbeat(db: Db, workerId: string, ids: string[], leaseUntil: Date): Promise<void> {
  if (ids.length === 0) return;
  await sql`update workflow_runs set locked_until = ${leaseUntil}
    where id = any(${ids}::uuid[]) and locked_by = ${workerId} and status = 'running'`.execute(db);
}

/**
 * Records what attempts have done so far, before their next steps start: one statement for
 * the checkpoints that came together (as finishRuns for outcomes), each only while its
 * attempt still holds the run (this worker's lease, and the attempt it claimed). Returns
 * the ids it recorded: a run missing from it was lost, and its attempt must stop.
 */
export async function checkpointRuns(
  db: Db,
  workerId: string,
  done: ReadonlyArray<{ id: string; attempt: number; checkpoint: RunCheckpoint }>,
  now: Date,
): Promise<Set<string>> {
  if (done.length === 0) return new Set();
  const { rows } = await sql<{ id: string }>`
    update workflow_runs as r set checkpoint = u.checkpoint::jsonb, updated_at = ${now}
    from unnest(${done.map((d) => d.id)}::uuid[], ${done.map((d) => d.attempt)}::int[], ${done.map((d) => JSON.stringify(d.checkpoint))}::text[])
      as u(id, attempt, checkpoint)
    where r.id = u.id and r.attempt = u.attempt and r.locked_by = ${workerId} and r.status = 'running'
    returning r.id`.execute(db);
  return new Set(rows.map((r) => r.id));
}

export const LEASE_LOST = 'The worker running this attempt stopped before it finished (its lease ran out)';
export const leaseLostTooOften = (times: number) =>
  `The worker running this run stopped before it finished ${times} times; the run is failed so that it cannot stop workers again`;

/**
 * Runs whose lease ran out: ready again (the lost attempt counts), or failed when it was
 * the last attempt (outcome dead_letter: losing a worker is transient) or the run has now
 * lost `maxLeaseLosses` workers (outcome failed: a run that crashes whichever process takes
 * it must not crash-loop the service). Returns how many were reclaimed.
 *
 * A run failed so whose version has on_failure steps is not finished here: it is made ready
 * once more with `checkpoint.failing` set (the step it was at, the lease-lost error), so that
 * attempt runs only the on_failure steps (worker/execute.ts), as a failure on the last attempt
 * would have. That attempt takes the lost one's number (the claim counts one): the run's
 * attempts stay within max_attempts. A run whose on_failure steps had started already is
 * failed as before: they never run twice.
 */
export async function reclaimExpired(db: Db, now: Date, maxLeaseLosses: number): Promise<number> {
  const { rows } = await sql<{ id: string }>`
    with expired as (
      select r.id,
        (r.attempt >= r.max_attempts or r.lease_losses + 1 >= ${maxLeaseLosses}) as gives_up,
        (r.lease_losses + 1 >= ${maxLeaseLosses}) as too_often,
        (jsonb_array_length(coalesce(v.on_failure, '[]'::jsonb)) > 0 and not coalesce(r.checkpoint ? 'failing', false)) as then_on_failure,
        -- The step it was at: the first of the version's own steps without a recorded success.
        coalesce((select s->>'key' from jsonb_array_elements(v.steps) with ordinality as t(s, n)
                  where not exists (select 1 from jsonb_array_elements(coalesce(r.checkpoint->'steps', '[]'::jsonb)) as c
                                    where c->>'key' = s->>'key' and c->>'status' = 'succeeded')
                  order by n limit 1), v.steps->-1->>'key', '') as step
      from workflow_runs as r join workflow_versions as v on v.workflow_id = r.workflow_id and v.version = r.workflow_version
      where r.status = 'running' and r.locked_until < ${now}
    ), u as (
      select e.*, (e.gives_up and not e.then_on_failure) as finished,
        (case when e.too_often then ${leaseLostTooOften(maxLeaseLosses)} else ${LEASE_LOST} end)::text as lost_error
      from expired as e
    )
    update workflow_runs as r
    set status = case when u.finished then 'failed' else 'retrying' end,
        outcome = case when not u.finished then null when u.too_often then 'failed' else 'dead_letter' end,
        error = u.lost_error,
        finished_at = case when u.finished then ${now}::timestamptz else null end,
        checkpoint = case
          when u.finished then null
          when u.gives_up then jsonb_set(coalesce(r.checkpoint, '{"steps": [], "tries": {}}'::jsonb) - 'parked', '{failing}',
            jsonb_build_object('step', u.step, 'error', u.lost_error, 'outcome', case when u.too_often then 'failed' else 'dead_letter' end, 'message', u.lost_error))
          else r.checkpoint end,
        attempt = case when u.gives_up and not u.finished then r.attempt - 1 else r.attempt end,
        lease_losses = r.lease_losses + 1,
        locked_by = null, locked_until = null, run_at = ${now}, updated_at = ${now}
    from u
    where r.id = u.id and r.status = 'running' and r.locked_until < ${now}
    returning r.id`.execute(db);
  return rows.length;
}

export interface Outcome {
  status: Extract<RunStatus, 'succeeded' | 'failed' | 'retrying' | 'waiting'>;
  /** Why the run ended; null while it is retrying. */
  outcome: RunOutcome | null;
  steps: StepRecord[];
  error: string | null;
  /** Facts this attempt's write_fact steps stored (duplicates not counted). */
  factsWritten: number;
  /** The step that failed, for the log: its key, `transient`, `permanent` or `unexpected`, its text, a provider's status. */
  failure?: { step: string; code: string; message: string; status?: number };
  /** For retrying: when the next attempt may start; for waiting: when the run resumes at the latest. */
  runAt?: Date;
  /** For waiting: the step type it parked on, whether it had parked on it before, and for a wait_for_delivery what it waits for. */
  wait?: { kind: string; resumed: boolean; delivery?: { trigger: string; match: string | null } };
  /** What a step threw that no failure of ours named: for the log only, never stored. */
  unexpected?: unknown;
  /** For retrying: what the next attempt resumes after (the outputs of the pure steps ride along here); absent: none. */
  checkpoint?: RunCheckpoint;
  /** The attempt stopped because its checkpoint was refused: another worker holds the run, and nothing is recorded. */
  leaseLost?: true;
}

/**
 * Records the outcomes of several attempts in one statement, each only while this worker
 * still holds its run (and, given `attempt`, while the run is still at that attempt). Returns the ids it recorded (a run missing from it was lost).
 */
export async function finishRuns(db: Db, workerId: string, done: Array<{ id: string; attempt?: number; outcome: Outcome }>, now: Date): Promise<Set<string>> {
  if (done.length === 0) return new Set();
  const col = <T>(f: (d: { id: string; attempt?: number; outcome: Outcome }) => T) => done.map(f);
  // A run parked on a wait_for_delivery gets its run_waits row (runs/waits.sql.ts); any other outcome drops the run's row, if it has one.
  const { rows } = await sql<{ id: string }>`
    with u as (
      select * from unnest(${col((d) => d.id)}::uuid[], ${col((d) => d.outcome.status)}::text[], ${col((d) => JSON.stringify(d.outcome.steps))}::text[],
                ${col((d) => d.outcome.error)}::text[], ${col((d) => d.outcome.runAt ?? now)}::timestamptz[],
                ${col((d) => d.outcome.outcome)}::text[], ${col((d) => d.outcome.factsWritten)}::int[],
                ${col((d) => (d.outcome.checkpoint === undefined ? null : JSON.stringify(d.outcome.checkpoint)))}::text[],
                ${col((d) => d.attempt ?? null)}::int[], ${col((d) => d.outcome.wait?.delivery?.trigger ?? null)}::text[],
                ${col((d) => d.outcome.wait?.delivery?.match ?? null)}::text[])
        as u(id, status, steps, error, run_at, outcome, facts_written, checkpoint, attempt, wait_trigger, wait_match)
    ), done as (
      update workflow_runs as r
      set status = u.status, outcome = u.outcome, facts_written = r.facts_written + u.facts_written,
          steps = u.steps::jsonb, checkpoint = u.checkpoint::jsonb, error = u.error, locked_by = null, locked_until = null, updated_at = ${now},
          finished_at = case when u.status in ('retrying', 'waiting') then r.finished_at else ${now}::timestamptz end,
          run_at = case when u.status in ('retrying', 'waiting') then u.run_at else r.run_at end,
          resume_at = case when u.status = 'waiting' then u.run_at end
      from u
      where r.id = u.id and r.locked_by = ${workerId} and r.status = 'running' and (u.attempt is null or r.attempt = u.attempt)
      returning r.id, r.workspace_id, r.workflow_id, u.status, u.run_at, u.wait_trigger, u.wait_match
    ), parked as (
      insert into run_waits (run_id, workspace_id, workflow_id, trigger_key, match, timeout_at, delivery, matched_at, inserted_at)
      select id, workspace_id, workflow_id, wait_trigger, wait_match, run_at, null, null, ${now} from done
      where status = 'waiting' and wait_trigger is not null
      on conflict (run_id) do update set trigger_key = excluded.trigger_key, match = excluded.match, timeout_at = excluded.timeout_at,
        delivery = null, matched_at = null, inserted_at = excluded.inserted_at
    ), gone as (
      delete from run_waits as w using done where w.run_id = done.id and (done.status <> 'waiting' or done.wait_trigger is null)
    )
    select id from done`.execute(db);
  return new Set(rows.map((r) => r.id));
}

/**
 * At shutdown: runs this worker claimed but will not finish go back to the queue, the attempt
 * not counted (a run resuming a wait goes back to waiting, ready at once: its claim counted none).
 */
export async function releaseRuns(db: Db, workerId: string, ids: string[], now: Date): Promise<void> {
  if (ids.length === 0) return;
  await sql`update workflow_runs
    set status = case when checkpoint ? 'parked' then 'waiting' else 'retrying' end,
        attempt = case when checkpoint ? 'parked' then attempt else greatest(attempt - 1, 0) end,
        resume_at = case when checkpoint ? 'parked' then ${now}::timestamptz end,
        locked_by = null, locked_until = null, run_at = ${now}, updated_at = ${now}
    where id = any(${ids}::uuid[]) and locked_by = ${workerId} and status = 'running'`.execute(db);
}

/** Finished runs older than the cutoff, in a batch; returns how many went. */
export async function deleteFinishedRuns(db: Db, cutoff: Date, batch: number): Promise<number> {
  const { rows } = await sql<{ id: string }>`
    delete from workflow_runs where id in (
      select id from workflow_runs where status in ('succeeded', 'failed', 'cancelled') and finished_at < ${cutoff} limit ${batch})
    returning id`.execute(db);
  return rows.length;
}
