import { sql } from 'kysely';
import type { Db } from '../db/connect.ts';

export interface ConnectorRow {
  id: string;
  auth_type: string;
  type: string | null;
  direction: string | null;
  config: Record<string, unknown> | null;
  secret_ciphertext: string | null;
  updated_at: Date;
  /** The operations of the api_spec attached to the connector (the newest), if any. */
  operations: unknown[] | null;
  servers: Array<{ url: string }> | null;
  /** What the row and its spec are at this read (CONNECTOR_VERSION): equal versions, equal contents. */
  version?: string;
}

/**
 * The newest api_spec attached to connector `c` (lateral). `columns` are what the caller
 * needs: the claim takes only what the version is made of, never the operations.
 */
const newestSpec = (columns: ReturnType<typeof sql>) => sql`left join lateral (
      select ${columns} from api_specs
      where external_connector_id = c.id and workspace_id = c.workspace_id
      order by updated_at desc, id desc limit 1
    ) as s on true`;

/**
 * A connector's version: the row versions (xmin, which every update changes whoever made it,
 * with updated_at beside it against xid wraparound) of the connector and of its newest spec,
 * and that spec's id (a spec attached or removed changes it). A worker keeps opened
 * connectors by this version (connector-cache.ts), and the claim reads it for each run.
 */
const CONNECTOR_VERSION = sql`concat_ws(':', c.xmin::text, (extract(epoch from c.updated_at) * 1000000)::bigint, s.id, s.xmin::text, (extract(epoch from s.updated_at) * 1000000)::bigint)`;

const UUID = '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$';

/**
 * For the claim (queue.sql.ts): `{connector id: version}` of the connectors the http_request
 * steps of version `v` name in run `r`'s workspace; null when none exists. An id that is no
 * uuid is left out (the step's own read says the connector does not exist).
 */
export const CLAIM_CONNECTOR_VERSIONS = sql`(select json_object_agg(c.id, ${CONNECTOR_VERSION}) from external_connectors as c
    ${newestSpec(sql`id, xmin, updated_at`)}
    where c.workspace_id = r.workspace_id and c.id in (
      select case when st->'config'->>'connector_id' ~* ${UUID} then (st->'config'->>'connector_id')::uuid end
      from jsonb_path_query(jsonb_build_array(v.steps, coalesce(v.on_failure, '[]'::jsonb)), 'strict $.** ? (exists(@.type) && exists(@.config))') as st
      where st->>'type' = 'http_request'))`;

/** A connector of the workspace with its attached specification's operations and its version, in one statement. */
export async function loadConnector(db: Db, workspaceId: string, id: string): Promise<ConnectorRow | undefined> {
  const { rows } = await sql<ConnectorRow>`
    select c.id, c.auth_type, c.type, c.direction, c.config, c.secret_ciphertext, c.updated_at, s.operations, s.servers,
           ${CONNECTOR_VERSION} as version
    from external_connectors as c
    ${newestSpec(sql`id, xmin, updated_at, operations, servers`)}
    where c.workspace_id = ${workspaceId} and c.id = ${id}`.execute(db);
  return rows[0];
}

export async function recordVerification(db: Db, workspaceId: string, id: string, ok: boolean, error: string | null, at: Date) {
  return db
    .updateTable('external_connectors')
    .set({ status: ok ? 'verified' : 'failing', last_error: error, last_verified_at: at, updated_at: at })
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirst();
}

/**
 * An inbound connector's status as its deliveries decide it (inbound-status.ts): only when
 * it changes, so concurrent processes that both see the change write the row once. Becoming
 * verified sets last_verified_at and clears last_error. Returns whether a row changed.
 */
export async function recordInboundStatus(db: Db, workspaceId: string, id: string, status: 'verified' | 'failing', error: string | null, at: Date) {
  const result = await db
    .updateTable('external_connectors')
    .set(status === 'verified' ? { status, last_verified_at: at, last_error: null } : { status, last_error: error })
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .where('direction', '=', 'inbound')
    .where(sql<boolean>`status is distinct from ${status}`)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

/** One call counted in a bucket of the database (inside takeBudget's transaction); returns the bucket's count after it. */
export async function hitWindow(db: Db, key: string, windowStart: number): Promise<number> {
  const { rows } = await sql<{ count: number }>`
    insert into rate_windows (key, window_start, count) values (${key}, ${windowStart}, 1)
    on conflict (key, window_start) do update set count = rate_windows.count + 1
    returning count`.execute(db);
  return rows[0]!.count;
}

/** The calls in the buckets of `key` starting at `from` or later, and the oldest such bucket with a call. */
export async function readBuckets(db: Db, key: string, from: number): Promise<{ used: number; oldest: number | null }> {
  const row = await db
    .selectFrom('rate_windows')
    .select((eb) => [eb.fn.sum<string | number | null>('count').as('used'), eb.fn.min<string | number | null>('window_start').as('oldest')])
    .where('key', '=', key)
    .where('window_start', '>=', String(from))
    .where('count', '>', 0)
    .executeTakeFirst();
  return { used: Number(row?.used ?? 0), oldest: row?.oldest == null ? null : Number(row.oldest) };
}

/** The buckets of `key` that left its range. */
export async function deleteBucketsBefore(db: Db, key: string, from: number): Promise<void> {
  await db.deleteFrom('rate_windows').where('key', '=', key).where('window_start', '<', String(from)).execute();
}

/** Windows that ended before `before` (ms since the epoch). */
export async function deleteOldWindows(db: Db, before: number): Promise<number> {
  const result = await db.deleteFrom('rate_windows').where('window_start', '<', String(before)).executeTakeFirst();
  return Number(result.numDeletedRows);
}
