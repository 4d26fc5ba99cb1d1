/** The generic reads of every JSON:API type, always narrowed by the type's visibility rule. */
import { sql } from 'kysely';
import type { Principal } from '../../auth/principal.ts';
import type { Db } from '../../db/connect.ts';
import type { ResourceType } from '../../resources/resource.ts';
import type { ParsedQuery } from './types.ts';
import { compileOnce, slot, type CompiledOnce } from '../../db/compiled.ts';
import { applyListQuery, countRows, readOrder, type PageSlots } from './list.sql.ts';

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
  return visibleRows(db, type, principal)
    .where(sql.ref(`${type.table}.id`), '=', id)
    .executeTakeFirst();
}

/** The columns a list selects: the serializer's, less the large ones a sparse fieldset leaves out. */
function listColumns(type: ResourceType, q: ParsedQuery): string[] {
  const wanted = q.fields.get(type.type);
  const columns = new Set(['id']);
  for (const [name, a] of Object.entries(type.attributes)) if (!a.large || wanted === undefined || wanted.has(name)) columns.add(a.column);
  for (const rel of Object.values(type.relationships)) if (rel.kind === 'one') columns.add(rel.column!);
  return [...columns];
}

/** Marks a budgeted list adds to its rows (see takeBudgetMarks). */
const MARKS = ['__size', '__cum', '__fetched'] as const;

/**
 * A page of visible rows (one beyond the limit), not yet run: for a statement that adds to
 * it. For a type with an answerBytesColumn whose large attributes are asked for, only the
 * rows whose running total of it stays within `budgetBytes` (and always the first): the
 * page is read in order with the large values still in the database's storage, and those
 * past the budget never leave it.
 */
export function listQuery(db: Db, type: ResourceType, principal: Principal, q: ParsedQuery, budgetBytes?: number, slots?: PageSlots) {
  const columns = listColumns(type, q);
  const select = (db as any).selectFrom(type.table).select(columns.map((c) => sql.ref(`${type.table}.${c}`).as(c)));
  const large = Object.values(type.attributes).some((a) => a.large && columns.includes(a.column));
  if (type.answerBytesColumn === undefined || budgetBytes === undefined || !large) return applyListQuery(type.visible(select, principal), type.table, q, slots);
  const page = applyListQuery(type.visible(select.select(sql.ref(`${type.table}.${type.answerBytesColumn}`).as('__size')), principal), type.table, q, slots);
  const order = (alias: string) =>
    sql.join(readOrder(q).map((k) => sql`${sql.ref(`${alias}.${k.column}`)} ${k.desc ? sql`desc nulls first` : sql`asc nulls last`}`));
  const running = (db as any)
    .selectFrom(page.as('p'))
    .selectAll('p')
    .select([
      sql`sum(p.__size) over (order by ${order('p')} rows between unbounded preceding and current row)`.as('__cum'),
      sql`count(*) over ()`.as('__fetched'),
    ]);
  return (db as any)
    .selectFrom(running.as('w'))
    .selectAll('w')
    .where(sql`w.__cum - w.__size < ${budgetBytes}`)
    .orderBy(sql`${order('w')}`);
}

/**
 * A principal of slots, for statements compiled once whose visibility rule binds the
 * caller's claims: its other fields are those of claimedPrincipal, so the text is the one
 * a request's own principal gives.
 */
export const SLOT_PRINCIPAL: Principal = {
  credentialId: slot('credentialId'),
  organizationId: slot('organizationId'),
  workspaceId: slot('workspaceId'),
  membershipId: '',
  userId: '',
  role: 'member',
  scopes: new Set(),
};

/**
 * A list's statements compiled once, by shape (one map per type). Building and compiling
 * the list statement with Kysely on every request cost more server CPU than its rows'
 * parsing; a list without filters, sparse fieldset of its own type or cursor has a text
 * decided by its page kind and its sort alone (every value, the caller's included, is a
 * parameter), so those are compiled once and bound. Other lists are built per request.
 */
export type ListStatements = Map<string, CompiledOnce>;

/** Shapes kept per type: sorts are bounded by the sortable attributes, but their orders are not. */
export const MAX_LIST_SHAPES = 16;

const PAGE_SLOTS: PageSlots = { limit: slot('limit'), offset: slot('offset') };

/** The key of a list whose text the shape decides; undefined for one built per request. */
export function listShape(type: ResourceType, q: ParsedQuery): string | undefined {
  if (q.filter.length > 0 || q.fields.has(type.type)) return undefined;
  if (q.page.kind === 'keyset' && (q.page.after !== undefined || q.page.before !== undefined)) return undefined;
  return `${q.page.kind} ${q.sort.map((k) => `${k.desc ? '-' : ''}${k.column}`).join(',')}`;
}

/**
 * The list statement of q's shape, compiled once (by `wrap`, over listQuery with the
 * slots of `principal` and of the page), or undefined when q has no fixed shape or the
 * type holds MAX_LIST_SHAPES already. Bind it with listSlotValues(q) and the principal's.
 */
export function listStatementOnce(
  statements: ListStatements,
  db: Db,
  type: ResourceType,
  principal: Principal,
  q: ParsedQuery,
  budgetBytes: number | undefined,
  wrap: (rows: ReturnType<typeof listQuery>) => Parameters<typeof compileOnce>[0],
): CompiledOnce | undefined {
  const shape = listShape(type, q);
  if (shape === undefined) return undefined;
  let statement = statements.get(shape);
  if (statement === undefined && statements.size < MAX_LIST_SHAPES) {
    statement = compileOnce(wrap(listQuery(db, type, principal, q, budgetBytes, PAGE_SLOTS)));
    statements.set(shape, statement);
  }
  return statement;
}

/** The page's values for a statement of listStatementOnce. */
export function listSlotValues(q: ParsedQuery): { limit: number; offset: number } {
  return { limit: q.page.limit + 1, offset: q.page.kind === 'offset' ? q.page.offset : 0 };
}

/** Takes a budgeted list's marks off its rows; `cut` when rows of the page were left in the database. */
export function takeBudgetMarks(rows: Record<string, any>[]): { rows: Record<string, any>[]; cut: boolean } {
  const first = rows[0];
  if (first === undefined || !('__fetched' in first)) return { rows, cut: false };
  const cut = rows.length < Number(first.__fetched);
  for (const row of rows) for (const m of MARKS) delete row[m];
  return { rows, cut };
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
