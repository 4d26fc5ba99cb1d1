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
}

/** A connector of the workspace with its attached specification's operations, in one statement. */
export async function loadConnector(db: Db, workspaceId: string, id: string): Promise<ConnectorRow | undefined> {
  const { rows } = await sql<ConnectorRow>`
    select c.id, c.auth_type, c.type, c.direction, c.config, c.secret_ciphertext, c.updated_at, s.operations, s.servers
    from external_connectors as c
    left join lateral (
      select operations, servers from api_specs
      where external_connector_id = c.id and workspace_id = c.workspace_id
      order by updated_at desc, id desc limit 1
    ) as s on true
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

/** One hit on a window counted in the database; returns the window's count after it. */
export async function hitWindow(db: Db, key: string, windowStart: number): Promise<number> {
  const { rows } = await sql<{ count: number }>`
    insert into rate_windows (key, window_start, count) values (${key}, ${windowStart}, 1)
    on conflict (key, window_start) do update set count = rate_windows.count + 1
    returning count`.execute(db);
  return rows[0]!.count;
}

/** A window's count as the database holds it: 0 when nothing hit it. */
export async function readWindow(db: Db, key: string, windowStart: number): Promise<number> {
  const row = await db.selectFrom('rate_windows').select('count').where('key', '=', key).where('window_start', '=', String(windowStart)).executeTakeFirst();
  return row?.count ?? 0;
}

/** Windows that ended before `before` (ms since the epoch). */
export async function deleteOldWindows(db: Db, before: number): Promise<number> {
  const result = await db.deleteFrom('rate_windows').where('window_start', '<', String(before)).executeTakeFirst();
  return Number(result.numDeletedRows);
}
