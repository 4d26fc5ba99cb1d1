import { sql } from 'kysely';
import type { Principal } from '../auth/principal.ts';
import type { AnyQuery } from '../db/connect.ts';

/** Rows of workspace-owned tables: only the caller's workspace. */
export function visibleInWorkspace(table: string) {
  return (qb: AnyQuery, p: Principal): AnyQuery => qb.where(sql.ref(`${table}.workspace_id`), '=', p.workspaceId);
}
