import { sql, type Kysely } from 'kysely';

/**
 * Each fact's validity on both axes, maintained by the writer: `superseded_at` is the
 * observed_at of the entity's next fact in the observed_at order (observed_at, inserted_at,
 * id), `superseded_inserted_at` the inserted_at of its next fact in the inserted_at order
 * (inserted_at, id); null while the fact is its entity's newest, and always null for a fact
 * without an entity id (its own entity, never superseded). A series (state at the end of
 * each bucket) then reads the facts whose [axis time, superseded) overlaps its window
 * instead of sorting the whole history for lag().
 *
 * Nullable without a default: no table rewrite. The backfill is one set-based UPDATE over
 * lead(): at the sizes stored today (about a million facts per installation, bench figures
 * in docs/benchmarks-facts.md) it is one sort of the history, seconds, and it runs once,
 * inside the migration's transaction, before any writer of this release starts.
 *
 * A rolling upgrade: a writer of the release before does not set the columns. Its new fact
 * is left null, which is right for the common in-order write (the newest is not
 * superseded), but the fact it supersedes keeps null too, so a series would count both.
 * Stop the old writers before running this migration (as for every migration here), or
 * re-run the backfill afterwards (refreshSupersededOfModel in src/facts/facts.sql.ts).
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table facts add column superseded_at timestamptz(3), add column superseded_inserted_at timestamptz(3)`.execute(db);
  await sql`
    update facts f set superseded_at = n.so, superseded_inserted_at = n.si
    from (
      select id,
        lead(observed_at) over (partition by data_model_id, entity_id order by observed_at, inserted_at, id) as so,
        lead(inserted_at) over (partition by data_model_id, entity_id order by inserted_at, id) as si
      from facts where entity_id is not null
    ) n
    where f.id = n.id and (n.so is not null or n.si is not null)
  `.execute(db);
}
