import { CompiledQuery, sql } from 'kysely';
import { preferPrepared, type Db } from '../db/connect.ts';
import { loadAccountWithCompiled, withAccountStatement, type AccountRow } from '../auth/auth.sql.ts';
import { compileOnce, slot, type CompiledOnce } from '../db/compiled.ts';
import type { WebhookAccept, WorkflowConcurrency } from '../db/tables.ts';

/** The trigger of a token hash with what a delivery needs: its workflow and inbound connector. */
function triggerQuery(db: Db, tokenHash: string) {
  return db
    .selectFrom('workflow_triggers as t')
    .innerJoin('workflows as w', 'w.id', 't.workflow_id')
    .innerJoin('organizations as o', 'o.id', 't.organization_id')
    .leftJoin('external_connectors as c', 'c.id', 't.inbound_connector_id')
    .select([
      't.id',
      't.key',
      't.accept',
      't.organization_id',
      't.workspace_id',
      't.service_account_id',
      't.workflow_id',
      'w.version as workflow_version',
      'w.is_active as workflow_active',
      // The run's key is computed under it: a change of it since the lookup is a change of the admission.
      'w.concurrency as workflow_concurrency',
      // So is the run's state key.
      'w.state_key as workflow_state_key',
      'o.domain as organization_domain',
      'c.id as connector_id',
      'c.auth_type as connector_auth_type',
      'c.secret_ciphertext as connector_secret',
      'c.config as connector_config',
      // What the delivery's check compares with (connectors/inbound-status.ts): a change of it is written, a steady state never.
      'c.status as connector_status',
    ])
    .where('t.token_hash', '=', tokenHash);
}

export interface TriggerRow {
  id: string;
  key: string;
  /** Whether a form body is taken too (form.ts). */
  accept: WebhookAccept;
  organization_id: string;
  workspace_id: string;
  service_account_id: string;
  workflow_id: string;
  workflow_version: number;
  workflow_active: boolean;
  workflow_concurrency: WorkflowConcurrency | null;
  workflow_state_key: string | null;
  organization_domain: string;
  connector_id: string | null;
  connector_auth_type: string | null;
  connector_secret: string | null;
  connector_config: Record<string, unknown> | null;
  connector_status: string | null;
}

/**
 * What the lookup found for (account, trigger token), and `state`: a digest of its whole row
 * (md5 of row_to_json), which the accepting statement recomputes from the rows as they are
 * then (see ACCEPT). Undefined when no account has this id.
 */
export interface Admission {
  account: AccountRow | undefined;
  trigger: TriggerRow | undefined;
  state: string | undefined;
}

interface Statements {
  lookup: CompiledOnce;
  /** ACCEPT with the state check: the lookup's text inside it, its parameters after ACCEPT's. */
  accept: string;
  lookupParams(accountId: string, tokenHash: string): unknown[];
}

let statements: Statements | undefined;

/**
 * The lookup, and the accepting statement that re-reads it. Both are built from one compiled
 * text, so the digest the accepting statement computes is the lookup's by construction:
 * whatever column the lookup reads (account, membership, trigger, workflow, organization,
 * connector), a change to it since the lookup makes the digests differ.
 */
function statementsOf(db: Db): Statements {
  if (statements) return statements;
  const inner = withAccountStatement(db, slot('accountId'), { rows: triggerQuery(db, slot('tokenHash')) }).compile();
  const lookup = compileOnce({ compile: () => CompiledQuery.raw(`select ${STATE_OF_X} as __state, x.* from (${inner.sql}) as x`, [...inner.parameters]) });
  // ACCEPT's own parameters are $1..$24; the lookup's follow them.
  const shifted = inner.sql.replace(/\$(\d+)/g, (_m: string, n: string) => `$${Number(n) + ACCEPT_PARAMS}`);
  const accept = ACCEPT.replace('/*lookup*/', shifted);
  preferPrepared(accept);
  statements = { lookup, accept, lookupParams: (accountId, tokenHash) => lookup.bind({ accountId, tokenHash }) };
  return statements;
}

/** The digest of a lookup row `x`: every column it read, as one text. */
const STATE_OF_X = 'md5(row_to_json(x)::text)';

/** The caller's account and the trigger of the token, in one statement compiled once (it runs on every delivery). */
export async function loadAccountAndTrigger(db: Db, accountId: string, tokenHash: string): Promise<Admission> {
  const { account, rows, values } = await loadAccountWithCompiled(db, statementsOf(db).lookup, { accountId, tokenHash }, ['state']);
  return { account, trigger: rows[0] as TriggerRow | undefined, state: values.state as string | undefined };
}

export interface NewRun {
  id: string;
  organizationId: string;
  workspaceId: string;
  workflowId: string;
  workflowVersion: number;
  triggerKey: string | null;
  deliveryId: string | null;
  payloadJson: string;
  /** The delivery's headers as the run keeps them (delivery-headers.ts), as JSON. */
  deliveryHeadersJson: string;
  maxAttempts: number;
  replayOf?: string | null;
  /** The W3C trace context of the delivery's span (tracing.ts); null when tracing is off. */
  traceparent: string | null;
  tracestate: string | null;
  /** The run's concurrency key and limit (runs/concurrency.ts); null: not limited. */
  concurrency: { key: string; limit: number } | null;
  /** The key of the state document the run reads and writes (runs/state-key.ts); null: ''. */
  stateKey: string | null;
}

/**
 * The guard and the run in one statement (so one commit): the run is inserted only when
 * the guard's insert took, i.e. when no unexpired guard of the same (organization,
 * identity) exists. The unique key decides between concurrent identical deliveries; an
 * expired guard is taken over in place. A verified delivery may bring a second key (its
 * signed identity beside a header's): both are taken or neither, so either one already
 * held makes the delivery a duplicate and a duplicate stores no key (a captured message
 * re-sent with a fresh Idempotency-Key must not take that key from a later, legitimate
 * delivery): `seen` finds an unexpired guard of either key in the statement's snapshot, and
 * then nothing is inserted. A guard committed by a concurrent delivery after that snapshot
 * is met by the insert's conflict instead: with two keys the update sets run_id to null,
 * which its NOT NULL refuses, so the whole statement (the other key's insert with it) is
 * undone, and acceptDelivery runs it again, when `seen` finds the guard (RACED).
 * (No NOTIFY here: see runs/wake.ts.)
 *
 * Nothing is inserted unless the lookup's row, read again inside this statement, still has
 * the digest the admission was decided on ($18, `current`): a delivery admitted from a
 * process's cache (surface.ts) is accepted only if no revocation (account deactivated or
 * moved, tokens revoked, scope removed, run-as membership deactivated, trigger dropped or
 * given to another account, workflow deactivated, connector changed) committed before this
 * statement began, whichever process made it. `current` false: decide again from a fresh lookup.
 *
 * The run's source identity (what its facts' source keys derive from, worker/execute.ts) is
 * the guard key, a digest already, with the instant the guard was taken: within the guard's
 * days the key makes one run, and a key seen again after its guard expired is a new
 * delivery whose facts are its own.
 * Returns the run's id, or undefined for a duplicate.
 *
 * The run's concurrency key and limit are $21, $22 (null: not limited); its state key $24.
 *
 * With `resume` ($19, $20: a waiting run the delivery matched, runs/delivery-waits.ts), no run is
 * inserted: the waiting run is made ready now with the delivery kept for its wait_for_delivery
 * (run_waits.delivery), and the guard names it. Only while it still waits unmatched: otherwise
 * nothing is inserted (`resume_lost`), and the delivery is accepted again without `resume`.
 *
 * Without `resume` and unless the waits were read already ($23), the statement itself
 * checks whether any run waits on the (workflow, trigger) now (`pending`, one probe of
 * run_waits_trigger_idx): if one does, nothing is inserted and `waits` says so, and the
 * delivery is decided again with the waits' matches. So a delivery no run waits for costs no
 * statement of its own, and a wait committed before this statement is never passed over.
 */
const ACCEPT = `
  with ok as (
    select 1 from (/*lookup*/) as x where ${STATE_OF_X} = $18
  ), seen as (
    select 1 from delivery_guards where organization_id = $1 and delivery_key in ($2::text, $13::text) and inserted_at >= $5 limit 1
  ), pending as (
    select 1 from run_waits
    where $19::uuid is null and not $23::boolean and workflow_id = $7 and trigger_key = $9 and matched_at is null and timeout_at > $4 and workspace_id = $6
    limit 1
  ), w as (
    update workflow_runs set run_at = $4, resume_at = $4, updated_at = $4
    where $19::uuid is not null and id = $19::uuid and workspace_id = $6 and status = 'waiting'
      and exists (select 1 from ok) and not exists (select 1 from seen)
    returning id
  ), wd as (
    update run_waits set delivery = $20::jsonb, matched_at = $4
    where run_id in (select id from w) and matched_at is null and workspace_id = $6
    returning run_id
  ), g as (
    insert into delivery_guards (organization_id, delivery_key, run_id, inserted_at)
    select $1, k, coalesce((select run_id from wd), $3), $4 from unnest(array[$2::text, $13::text]) as k
    where k is not null and exists (select 1 from ok) and not exists (select 1 from seen)
      and ($19::uuid is null or exists (select 1 from wd)) and not exists (select 1 from pending)
    on conflict (organization_id, delivery_key) do update
      set run_id = case when delivery_guards.inserted_at < $5 then excluded.run_id end, inserted_at = excluded.inserted_at
      where delivery_guards.inserted_at < $5 or $13::text is not null
    returning run_id
  ), r as (
    insert into workflow_runs (id, organization_id, workspace_id, workflow_id, workflow_version, trigger_key, delivery_id, payload, max_attempts, run_at, inserted_at, updated_at, source_identity, delivery_headers, traceparent, tracestate, concurrency_key, concurrency_limit, state_key)
    select g.run_id, $1, $6, $7, $8, $9, $10, $11::jsonb, $12, $4, $4, $4, $14, $15::jsonb, $16, $17, $21::text, $22::int, $24::text
    from g
    where $19::uuid is null and (select count(*) from g) = case when $13::text is null then 1 else 2 end
    limit 1
    returning id
  )
  select exists (select 1 from ok) as current, (select id from r) as id, (select run_id from wd) as resumed,
    $19::uuid is not null and exists (select 1 from ok) and not exists (select 1 from seen) and not exists (select 1 from wd) as resume_lost,
    exists (select 1 from ok) and not exists (select 1 from seen) and exists (select 1 from pending) as waits`;
const ACCEPT_PARAMS = 24;

/** A delivery's source identity: its guard key (a digest, never a header value or secret in clear) and when it was taken. */
export const deliverySourceIdentity = (guardKey: string, now: Date) => `delivery:${guardKey}@${now.toISOString()}`;

/** What the accepting statement re-checks: the lookup's key and the digest the delivery was admitted on. */
export interface AdmittedAs {
  accountId: string;
  tokenHash: string;
  state: string;
}

/** The run's id (undefined for a duplicate), or `current: false` when the admission no longer holds (nothing inserted). */
export async function acceptDelivery(
  db: Db,
  run: NewRun,
  guardKey: string,
  now: Date,
  guardCutoff: Date,
  signedKey: string | null,
  admitted: AdmittedAs,
  resume?: { runId: string; deliveryJson: string },
  waitsChecked = false,
): Promise<{ current: boolean; runId: string | undefined; resumed?: true; waits?: true }> {
  const { accept, lookupParams } = statementsOf(db);
  const params = [
    run.organizationId,
    guardKey,
    run.id,
    now,
    guardCutoff,
    run.workspaceId,
    run.workflowId,
    run.workflowVersion,
    run.triggerKey,
    run.deliveryId,
    run.payloadJson,
    run.maxAttempts,
    signedKey,
    deliverySourceIdentity(guardKey, now),
    run.deliveryHeadersJson,
    run.traceparent,
    run.tracestate,
    admitted.state,
    resume?.runId ?? null,
    resume?.deliveryJson ?? null,
    run.concurrency?.key ?? null,
    run.concurrency?.limit ?? null,
    waitsChecked || resume !== undefined,
    run.stateKey,
    ...lookupParams(admitted.accountId, admitted.tokenHash),
  ];
  type Row = { current: boolean; id: string | null; resumed: string | null; resume_lost: boolean; waits: boolean };
  for (let attempt = 1; ; attempt++) {
    try {
      const row = (await db.executeQuery<Row>(CompiledQuery.raw(accept, params) as CompiledQuery<Row>)).rows[0];
      // The run stopped waiting since it was matched (its timeout, a cancel, another delivery): accepted as any delivery.
      if (row?.resume_lost === true) return acceptDelivery(db, run, guardKey, now, guardCutoff, signedKey, admitted, undefined, true);
      if (row?.resumed) return { current: true, runId: row.resumed, resumed: true };
      if (row?.waits === true) return { current: true, runId: undefined, waits: true };
      return { current: row?.current === true, runId: row?.id ?? undefined };
    } catch (err) {
      // Each race is lost to a guard now committed, which the next statement sees: a bound for safety only.
      if (!raced(err) || attempt >= MAX_RACES) throw err;
    }
  }
}

/** Statements of one delivery undone by concurrent deliveries of the same identity before it is answered 503. */
const MAX_RACES = 5;

/** The accepting statement met a guard committed since its snapshot (see ACCEPT): nothing of it was kept. */
function raced(err: unknown): boolean {
  const e = err as { code?: unknown; column?: unknown; table?: unknown };
  return e?.code === '23502' && (e.column === 'run_id' || e.table === 'delivery_guards');
}

/** Up to `batch` delivery guards inserted before `cutoff` (the sweep's, DELIVERY_GUARD_DAYS). */
export async function deleteExpiredGuards(db: Db, cutoff: Date, batch: number): Promise<number> {
  const { rows } = await sql<{ organization_id: string }>`
    delete from delivery_guards where (organization_id, delivery_key) in (
      select organization_id, delivery_key from delivery_guards where inserted_at < ${cutoff} limit ${batch})
    returning organization_id`.execute(db);
  return rows.length;
}
