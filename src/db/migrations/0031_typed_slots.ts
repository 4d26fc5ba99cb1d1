import { sql, type Kysely } from 'kysely';

/**
 * Typed storage of indexed fields (docs/architecture.md, "Typed storage of indexed fields"):
 * value slots on facts and fact_current (num_N numeric for integer and float, txt_N text for
 * string and boolean, ts_N timestamptz for datetime), and per field the slot it owns.
 *
 * Additive: the columns are nullable without a default (no table rewrite), and a field gets a
 * slot only when is_indexed is set on a release that knows them. Writers of the release
 * before leave the slots null, which no reader trusts until the field's backfill has filled
 * them (slot_ready).
 */
const SLOTS = [
  ...[1, 2, 3, 4, 5, 6].map((n) => `num_${n} numeric`),
  ...[1, 2, 3, 4, 5, 6].map((n) => `txt_${n} text`),
  ...[1, 2, 3].map((n) => `ts_${n} timestamptz`),
];

export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table data_model_fields add column slot text, add column slot_ready boolean not null default false`.execute(db);
  await sql`alter table data_model_fields add constraint data_model_fields_slot_check check (slot ~ '^(num|txt|ts)_[1-9]$')`.execute(db);
  await sql`create unique index data_model_fields_model_slot_key on data_model_fields (data_model_id, slot) where slot is not null`.execute(db);
  const columns = sql.raw(SLOTS.map((s) => `add column ${s}`).join(', '));
  await sql`alter table facts ${columns}`.execute(db);
  await sql`alter table fact_current ${columns}`.execute(db);
}
