import { sql } from 'kysely';
import type { Principal } from '../auth/principal.ts';
import type { AnyQuery } from '../db/connect.ts';

/** Rows of workspace-owned tables: only the caller's workspace. */
export function visibleInWorkspace(table: string) {
  return (qb: AnyQuery, p: Principal): AnyQuery => qb.where(sql.ref(`${table}.workspace_id`), '=', p.workspaceId);
}

/** Rows of a soft-deleting table (a `deleted_at` column): only the caller's workspace, never a deleted row. */
export function visibleUndeletedInWorkspace(table: string) {
  return (qb: AnyQuery, p: Principal): AnyQuery =>
    qb.where(sql.ref(`${table}.workspace_id`), '=', p.workspaceId).where(sql.ref(`${table}.deleted_at`), 'is', null);
}
