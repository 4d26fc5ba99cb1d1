/**
 * Every statement of the fact store: the write path, the current-state upkeep, retention
 * and the lookups of the import. Each function takes the handle to run on (a transaction
 * or the db) and never opens another.
 *
 * fact_current ordering, per axis:
 *   observed_at: (observed_at, inserted_at, id)
 *   inserted_at: (inserted_at, id)
 * The greatest tuple is the current fact of its (data model, axis, entity_key); entity_key
 * is the entity id, or '#' || fact id for a fact without one (each such fact its own entity).
 */
import { preferPrepared, type Db } from '../db/connect.ts';
import { sql } from 'kysely';
import type { TimeAxis } from '../db/tables.ts';
import type { Frag } from './query/plan-types.ts';
import { SLOT_COLUMNS, SLOT_FROM_EXCLUDED, slotAssignmentsSql, slotColumnsOf, slotValuesSql } from './slots.sql.ts';

/**
 * The end of every fact_current upsert (the target is aliased `c`): replace the row only
 * with a fact that orders after it on the row's axis. The comparison runs against the row
 * as it is once locked, so out-of-order and concurrent writes cannot move it back.
 */
const KEEP_GREATEST = sql`
    on conflict (data_model_id, axis, entity_key) do update set
      fact_id = excluded.fact_id,
      workspace_id = excluded.workspace_id,
      entity_id = excluded.entity_id,
      observed_at = excluded.observed_at,
      inserted_at = excluded.inserted_at,
      data = excluded.data,
      ${SLOT_FROM_EXCLUDED}
    where case when excluded.axis = 'observed_at'
      then (excluded.observed_at, excluded.inserted_at, excluded.fact_id) > (c.observed_at, c.inserted_at, c.fact_id)
      else (excluded.inserted_at, excluded.fact_id) > (c.inserted_at, c.fact_id)
    end`;

/** One fact to store, as writeFacts prepared it (validated, entity id derived, data as JSON text). */
export interface NewFact {
  id: string;
  entity_id: string | null;
  observed_at: string;
  data: string;
  source_key: string;
}

/** A fact with its scope: the rows of one statement may belong to several models and workspaces (the worker's fact writer). */
export interface ScopedFact extends NewFact {
  organization_id: string;
  workspace_id: string;
  data_model_id: string;
}

/** Code-unit order, the same in every writer (a collation could differ between sessions; JS's does not). */
const byModelAndKey = (a: ScopedFact, b: ScopedFact) =>
  a.data_model_id < b.data_model_id ? -1 : a.data_model_id > b.data_model_id ? 1 : a.source_key < b.source_key ? -1 : a.source_key > b.source_key ? 1 : 0;

/**
 * Stores facts, of any number of models, and folds them into fact_current on both axes, in
 * one statement; returns the ids written. A fact whose (data model, source key) is already
 * stored, or repeated earlier in `rows`, is skipped and left out of fact_current.
 *
 * The rows travel as one array per column (`unnest`), so the statement's text stays the
 * same whatever the number of rows (one prepared statement), and fact_current is fed from the insert's
 * RETURNING instead of reading the new facts back by id. Facts are inserted sorted by
 * (data model, source key) and DISTINCT ON reduces them to one candidate per model, entity
 * and axis (one INSERT ... ON CONFLICT may not touch a row twice); candidates go in sorted
 * by (data model, axis, entity_key), the primary key's order. Every writer takes both locks
 * in the same orders, so two writers of overlapping keys or entities wait for each other
 * instead of deadlocking.
 */
export async function storeFactRows(db: Db, rows: ScopedFact[]): Promise<string[]> {
  if (rows.length === 0) return [];
  const sorted = [...rows].sort(byModelAndKey);
  const column = <K extends keyof ScopedFact>(k: K) => sorted.map((r) => r[k]);
  // The typed slots (slots.sql.ts) are computed here from the assignments this statement
  // reads, so no writer stores them from an older copy of the model.
  const statement = sql<{ id: string }>`
    with a as (${slotAssignmentsSql(sql`${column('data_model_id')}::uuid[]` as Frag)}),
    ins as (
      insert into facts (id, organization_id, workspace_id, data_model_id, entity_id, observed_at, data, source_key, ${SLOT_COLUMNS})
      select u.id, u.organization_id, u.workspace_id, u.data_model_id, u.entity_id, u.observed_at, u.data, u.source_key, ${sql.join(slotValuesSql(sql`u.data` as Frag, 'a'))}
      from unnest(${column('id')}::uuid[], ${column('organization_id')}::uuid[], ${column('workspace_id')}::uuid[], ${column('data_model_id')}::uuid[],
                  ${column('entity_id')}::text[], ${column('observed_at')}::timestamptz[], ${column('data')}::jsonb[], ${column('source_key')}::text[])
        with ordinality as u(id, organization_id, workspace_id, data_model_id, entity_id, observed_at, data, source_key, n)
      left join a on a.data_model_id = u.data_model_id
      order by u.n
      on conflict on constraint facts_model_source_key do nothing
      returning id, data_model_id, workspace_id, entity_id, observed_at, inserted_at, data, ${SLOT_COLUMNS}
    ),
    cur as (
      insert into fact_current as c (data_model_id, axis, entity_key, fact_id, workspace_id, entity_id, observed_at, inserted_at, data, ${SLOT_COLUMNS})
      select s.data_model_id, s.axis, s.entity_key, s.id, s.workspace_id, s.entity_id, s.observed_at, s.inserted_at, s.data, ${slotColumnsOf('s')}
      from (
        (select distinct on (f.data_model_id, entity_key) 'observed_at'::text as axis, coalesce(f.entity_id, '#' || f.id::text) as entity_key,
                f.id, f.data_model_id, f.workspace_id, f.entity_id, f.observed_at, f.inserted_at, f.data, ${slotColumnsOf('f')}
         from ins f
         order by f.data_model_id, entity_key, f.observed_at desc, f.inserted_at desc, f.id desc)
        union all
        (select distinct on (f.data_model_id, entity_key) 'inserted_at'::text as axis, coalesce(f.entity_id, '#' || f.id::text) as entity_key,
                f.id, f.data_model_id, f.workspace_id, f.entity_id, f.observed_at, f.inserted_at, f.data, ${slotColumnsOf('f')}
         from ins f
         order by f.data_model_id, entity_key, f.inserted_at desc, f.id desc)
      ) s
      order by s.data_model_id, s.axis, s.entity_key
      ${KEEP_GREATEST}
    )
    select id from ins
  `.compile(db);
  // The text is the same for every batch (the rows are array parameters): named and
  // prepared on PostgreSQL, it is planned once per connection instead of per statement.
  preferPrepared(statement.sql);
  const { rows: written } = await db.executeQuery(statement);
  return written.map((r) => r.id);
}

/** The workspace an import names, with its organization (the import's scope). */
export function findImportWorkspace(db: Db, id: string) {
  return db.selectFrom('workspaces').select(['id', 'organization_id']).where('id', '=', id).executeTakeFirst();
}

/** Models with a retention window and the instant before which their facts expire. */
export async function modelsWithRetention(db: Db, now: Date): Promise<Array<{ id: string; cutoff: Date }>> {
  const { rows } = await sql<{ id: string; cutoff: Date }>`
    select id, ${now}::timestamptz - make_interval(days => retention_days) as cutoff
    from data_models where retention_days is not null order by id
  `.execute(db);
  return rows;
}

/**
 * Deletes up to `limit` facts of a model observed before `cutoff`, oldest first; returns
 * their ids. Only one sweep runs at a time (sweepExclusive in maintenance/sweep.ts): two would
 * each restore fact_current to facts the other is deleting. SKIP LOCKED only keeps a batch
 * from waiting on a row some other transaction holds; the next sweep takes it.
 */
export async function deleteExpiredFacts(db: Db, dataModelId: string, cutoff: Date, limit: number): Promise<string[]> {
  const { rows } = await sql<{ id: string }>`
    delete from facts where id in (
      select id from facts
      where data_model_id = ${dataModelId} and observed_at < ${cutoff.toISOString()}::timestamptz
      order by observed_at, id
      limit ${limit}
      for update skip locked
    )
    returning id
  `.execute(db);
  return rows.map((r) => r.id);
}

/**
 * Removes the fact_current rows that point at deleted facts and returns their entities.
 * Rows are locked in (axis, entity_key) order, the writers' order. A row a concurrent
 * writer has meanwhile moved to a newer fact no longer matches and is left alone.
 */
export async function detachCurrent(db: Db, dataModelId: string, factIds: string[]): Promise<Array<{ axis: TimeAxis; entity_id: string | null }>> {
  if (factIds.length === 0) return [];
  const { rows } = await sql<{ axis: TimeAxis; entity_id: string | null }>`
    delete from fact_current c
    using (
      select data_model_id, axis, entity_key from fact_current
      where data_model_id = ${dataModelId} and fact_id = any(${factIds}::uuid[])
      order by axis, entity_key
      for update
    ) d
    where c.data_model_id = d.data_model_id and c.axis = d.axis and c.entity_key = d.entity_key
      and c.fact_id = any(${factIds}::uuid[])
    returning c.axis, c.entity_id
  `.execute(db);
  return rows;
}

/**
 * Sets fact_current of the given entities on one axis to their latest remaining fact (one
 * index probe per entity); an entity without facts left gets no row.
 */
export async function restoreCurrent(db: Db, dataModelId: string, axis: TimeAxis, entityIds: string[]): Promise<void> {
  if (entityIds.length === 0) return;
  const latest = axis === 'observed_at' ? sql`order by f.observed_at desc, f.inserted_at desc, f.id desc` : sql`order by f.inserted_at desc, f.id desc`;
  await sql`
    insert into fact_current as c (data_model_id, axis, entity_key, fact_id, workspace_id, entity_id, observed_at, inserted_at, data, ${SLOT_COLUMNS})
    select l.data_model_id, ${axis}::text, l.entity_id, l.id, l.workspace_id, l.entity_id, l.observed_at, l.inserted_at, l.data, ${slotColumnsOf('l')}
    from unnest(${entityIds}::text[]) as e(entity_id)
    cross join lateral (
      select f.id, f.data_model_id, f.workspace_id, f.entity_id, f.observed_at, f.inserted_at, f.data, ${slotColumnsOf('f')}
      from facts f
      where f.data_model_id = ${dataModelId} and f.entity_id = e.entity_id
      ${latest}
      limit 1
    ) l
    order by l.entity_id
    ${KEEP_GREATEST}
  `.execute(db);
}
