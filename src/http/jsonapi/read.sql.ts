/** The generic reads of every JSON:API type, always narrowed by the type's visibility rule. */
import { sql } from 'kysely';
import type { Principal } from '../../auth/principal.ts';
import type { Db } from '../../db/connect.ts';
import type { ResourceType } from './resource.ts';
import type { ParsedQuery } from './types.ts';
import { applyListQuery, countRows } from './list.sql.ts';

type Row = Record<string, any>;

function visibleRows(db: Db, type: ResourceType, principal: Principal) {
  return type.visible((db as any).selectFrom(type.table).selectAll(type.table), principal);
}

/**
 * The select for one visible row by id, not yet run: for a statement that adds to it.
 * It names its columns (those the serializer reads) instead of `*`, so the statement can
 * be prepared without a migration ever changing its result type under a running server.
 */
export function visibleRowById(db: Db, type: ResourceType, principal: Principal, id: string) {
  return visibleNamedColumns(db, type, principal).where(sql.ref(`${type.table}.id`), '=', id);
}

/** Visible rows with the columns the serializer reads, named: a prepared statement's result type never changes. */
function visibleNamedColumns(db: Db, type: ResourceType, principal: Principal) {
  const columns = new Set(['id', ...Object.values(type.attributes).map((a) => a.column)]);
  for (const rel of Object.values(type.relationships)) if (rel.kind === 'one') columns.add(rel.column!);
  const select = (db as any).selectFrom(type.table).select([...columns].map((c) => sql.ref(`${type.table}.${c}`).as(c)));
  return type.visible(select, principal);
}

export async function findVisible(db: Db, type: ResourceType, principal: Principal, id: string): Promise<Row | undefined> {
  return visibleRows(db, type, principal).where(sql.ref(`${type.table}.id`), '=', id).executeTakeFirst();
}

/** A page of visible rows (one beyond the limit), not yet run: for a statement that adds to it. */
export function listQuery(db: Db, type: ResourceType, principal: Principal, q: ParsedQuery) {
  return applyListQuery(visibleNamedColumns(db, type, principal), type.table, q);
}

export async function listVisible(db: Db, type: ResourceType, principal: Principal, q: ParsedQuery): Promise<Row[]> {
  return applyListQuery(visibleRows(db, type, principal), type.table, q).execute();
}

export async function countVisible(db: Db, type: ResourceType, principal: Principal, q: ParsedQuery): Promise<number> {
  return countRows(visibleRows(db, type, principal), type.table, q);
}

/**
 * Visible rows of `type` whose `column` is one of `values` (ids for to-one, foreign keys for
 * to-many), at most `limit` of them (a caller asks one more than it allows, to tell).
 */
export async function loadVisibleBy(db: Db, type: ResourceType, principal: Principal, column: string, values: string[], limit?: number): Promise<Row[]> {
  if (values.length === 0) return [];
  let q = visibleRows(db, type, principal)
    .where(sql.ref(`${type.table}.${column}`), 'in', values)
    .orderBy(sql.ref(`${type.table}.id`));
  if (limit !== undefined) q = q.limit(limit);
  return q.execute();
}
