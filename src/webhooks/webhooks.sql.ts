import { CompiledQuery, sql } from 'kysely';
import { preferPrepared, type Db } from '../db/connect.ts';
import { loadAccountWithCompiled, withAccountStatement, type AccountRow } from '../auth/auth.sql.ts';
import { compileOnce, slot, type CompiledOnce } from '../db/compiled.ts';

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
      't.organization_id',
      't.workspace_id',
      't.service_account_id',
      't.workflow_id',
      'w.version as workflow_version',
      'w.is_active as workflow_active',
      'o.domain as organization_domain',
      'c.id as connector_id',
      'c.auth_type as connector_auth_type',
      'c.secret_ciphertext as connector_secret',
      'c.config as connector_config',
    ])
    .where('t.token_hash', '=', tokenHash);
}

export interface TriggerRow {
  id: string;
  key: string;
  organization_id: string;
  workspace_id: string;
  service_account_id: string;
  workflow_id: string;
  workflow_version: number;
  workflow_active: boolean;
  organization_domain: string;
  connector_id: string | null;
  connector_auth_type: string | null;
  connector_secret: string | null;
  connector_config: Record<string, unknown> | null;
}

let byToken: CompiledOnce | undefined;

/** The caller's account and the trigger of the token, in one statement compiled once (it runs on every delivery). */
export async function loadAccountAndTrigger(
  db: Db,
  accountId: string,
  tokenHash: string,
): Promise<{ account: AccountRow | undefined; trigger: TriggerRow | undefined }> {
  byToken ??= compileOnce(withAccountStatement(db, slot('accountId'), { rows: triggerQuery(db, slot('tokenHash')) }));
  const { account, rows } = await loadAccountWithCompiled(db, byToken, { accountId, tokenHash });
  return { account, trigger: rows[0] as TriggerRow | undefined };
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
}

/**
 * The guard and the run in one statement (so one commit): the run is inserted only when
 * the guard's insert took, i.e. when no unexpired guard of the same (organization,
 * identity) exists. The unique key decides between concurrent identical deliveries; an
 * expired guard is taken over in place. A verified delivery may bring a second key (the
 * signed message id beside a header's): the run is inserted only when every key took, so
 * either one already held makes the delivery a duplicate. A key taken for a delivery that
 * made no run only ever turns a later one with that key into a duplicate, which it is.
 * (No NOTIFY here: see workflows/wake.ts.)
 *
 * The run's source identity (what its facts' source keys derive from, worker/steps.ts) is
 * the guard key, a digest already, with the instant the guard was taken: within the guard's
 * days the key makes one run, and a key seen again after its guard expired is a new
 * delivery whose facts are its own.
 * Returns the run's id, or undefined for a duplicate.
 */
const ACCEPT = `
  with g as (
    insert into delivery_guards (organization_id, delivery_key, run_id, inserted_at)
    select $1, k, $3, $4 from unnest(array[$2::text, $13::text]) as k where k is not null
    on conflict (organization_id, delivery_key) do update set run_id = excluded.run_id, inserted_at = excluded.inserted_at
      where delivery_guards.inserted_at < $5
    returning run_id
  ), r as (
    insert into workflow_runs (id, organization_id, workspace_id, workflow_id, workflow_version, trigger_key, delivery_id, payload, max_attempts, run_at, inserted_at, updated_at, source_identity, delivery_headers, traceparent, tracestate)
    select g.run_id, $1, $6, $7, $8, $9, $10, $11::jsonb, $12, $4, $4, $4, $14, $15::jsonb, $16, $17
    from g
    where (select count(*) from g) = case when $13::text is null then 1 else 2 end
    limit 1
    returning id
  )
  select id from r`;
// Named once: the text is fixed, and it runs on every delivery.
preferPrepared(ACCEPT);

/** A delivery's source identity: its guard key (a digest, never a header value or secret in clear) and when it was taken. */
export const deliverySourceIdentity = (guardKey: string, now: Date) => `delivery:${guardKey}@${now.toISOString()}`;

export async function acceptDelivery(
  db: Db,
  run: NewRun,
  guardKey: string,
  now: Date,
  guardCutoff: Date,
  signedKey: string | null = null,
): Promise<string | undefined> {
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
  ];
  const result = await db.executeQuery<{ id: string }>(CompiledQuery.raw(ACCEPT, params) as CompiledQuery<{ id: string }>);
  return result.rows[0]?.id;
}

/** Up to `batch` delivery guards inserted before `cutoff` (the sweep's, DELIVERY_GUARD_DAYS). */
export async function deleteExpiredGuards(db: Db, cutoff: Date, batch: number): Promise<number> {
  const { rows } = await sql<{ organization_id: string }>`
    delete from delivery_guards where (organization_id, delivery_key) in (
      select organization_id, delivery_key from delivery_guards where inserted_at < ${cutoff} limit ${batch})
    returning organization_id`.execute(db);
  return rows.length;
}
