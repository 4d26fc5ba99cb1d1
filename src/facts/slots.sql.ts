/**
 * Typed value slots (migration 0031): an indexed field's value is stored, typed, in a column
 * of facts and fact_current that the field owns (data_model_fields.slot), so that filters,
 * groups and measures read a btree index instead of the JSONB row. docs/architecture.md,
 * "Typed storage of indexed fields", has the layout and the figures that chose it.
 *
 * Writers compute the slots in their own statement from the model's slot assignments read by
 * that statement (slotValuesSql), so a writer holding an older copy of the model cannot
 * store a stale slot. Readers use a slot only once the field's backfill has filled it
 * (slot_ready); until then fieldValue reads `data`.
 */
import { sql } from 'kysely';
import type { Db } from '../db/connect.ts';
import type { FieldType } from '../db/tables.ts';
import type { Frag } from './query/plan-types.ts';

export type SlotKind = 'num' | 'txt' | 'ts';

/** The slots of each kind, as migration 0031 made them. */
export const SLOT_COUNTS: Readonly<Record<SlotKind, number>> = { num: 6, txt: 6, ts: 3 };

export const ALL_SLOTS: readonly string[] = (Object.entries(SLOT_COUNTS) as [SlotKind, number][]).flatMap(([kind, n]) =>
  Array.from({ length: n }, (_, i) => `${kind}_${i + 1}`),
);

const SLOT_NAME = /^(num|txt|ts)_[1-9]$/;

/** The kind of slot a field of this type is stored in; undefined for types without one (map, untyped). */
export function slotKind(type: FieldType | null): SlotKind | undefined {
  switch (type) {
    case 'integer':
    case 'float':
      return 'num';
    case 'string':
    case 'boolean':
      return 'txt';
    case 'datetime':
      return 'ts';
    default:
      return undefined;
  }
}

/** A slot column on the row `alias`, its name checked (it is an identifier, never a parameter). */
export function slotRef(alias: string, slot: string): Frag {
  if (!SLOT_NAME.test(slot) || !ALL_SLOTS.includes(slot)) throw new Error(`not a slot: ${slot}`);
  return sql.ref(`${alias}.${slot}`) as Frag;
}

// The same guard as fieldValue's (typed.sql.ts): an ISO 8601 instant, or null.
const ISO_GUARD = '^\\d{4}-\\d{2}-\\d{2}[Tt ]\\d{2}:\\d{2}(:\\d{2}(\\.\\d+)?)?([Zz]|[+-]\\d{2}(:?\\d{2})?)$';

/**
 * The value a slot of `kind` stores for the member `name` of `data`, exactly what fieldValue
 * reads out of `data` for a field of that type (null when absent, null or of another type).
 * txt slots hold strings and booleans ('true' / 'false'): `jsonType` is the JSON type the
 * field's values have. A null `name` (the slot is free) gives null.
 */
export function slotValue(kind: SlotKind, data: Frag, name: Frag, jsonType: Frag): Frag {
  const member = sql`(${data} -> ${name})`;
  const text = sql`(${data} ->> ${name})`;
  switch (kind) {
    case 'num':
      return sql`(case when jsonb_typeof(${member}) = 'number' then ${text}::numeric end)`;
    case 'txt':
      return sql`(case when jsonb_typeof(${member}) = ${jsonType} then ${text} end)`;
    case 'ts':
      return sql`(case when jsonb_typeof(${member}) = 'string' and ${text} ~ ${ISO_GUARD} then tributary_timestamptz_or_null(${text}) end)`;
  }
}

const kindOf = (slot: string) => slot.slice(0, slot.indexOf('_')) as SlotKind;

/**
 * The slot assignments of the models `modelIds` (a SQL uuid[] expression) as one row per model
 * that has any: for each slot `<slot>_name` (the field's name) and `<slot>_json` (the JSON type
 * of its values), null where the slot is free. For a writer's statement, read once per statement.
 */
export function slotAssignmentsSql(modelIds: Frag): Frag {
  const cols = ALL_SLOTS.map(
    (s) =>
      sql`max(f.name) filter (where f.slot = ${sql.lit(s)}) as ${sql.id(`${s}_name`)}, max(case when f.type = 'boolean' then 'boolean' else 'string' end) filter (where f.slot = ${sql.lit(s)}) as ${sql.id(`${s}_json`)}`,
  );
  return sql`select f.data_model_id, ${sql.join(cols)} from data_model_fields f
    where f.data_model_id = any(${modelIds}) and f.slot is not null group by f.data_model_id`;
}

/** Every slot's value over `data`, given the assignments row `a` (slotAssignmentsSql), in ALL_SLOTS order. */
export function slotValuesSql(data: Frag, a: string): Frag[] {
  return ALL_SLOTS.map((s) => slotValue(kindOf(s), data, sql.ref(`${a}.${s}_name`) as Frag, sql.ref(`${a}.${s}_json`) as Frag));
}

/** The slot columns, in ALL_SLOTS order, as a column list. */
export const SLOT_COLUMNS: Frag = sql.raw(ALL_SLOTS.join(', ')) as Frag;

/** `alias.<slot>` for every slot, in ALL_SLOTS order. */
export function slotColumnsOf(alias: string): Frag {
  return sql.join(ALL_SLOTS.map((s) => sql.ref(`${alias}.${s}`)));
}

/** For an upsert: `slot = excluded.slot` for every slot. */
export const SLOT_FROM_EXCLUDED: Frag = sql.raw(ALL_SLOTS.map((s) => `${s} = excluded.${s}`).join(',\n      ')) as Frag;

export interface SlottedField {
  id: string;
  data_model_id: string;
  name: string;
  type: FieldType | null;
}

/**
 * Gives the field a free slot of its type's kind (keeping the one it has if of that kind) and
 * marks it not ready, in one transaction that locks the model's row (two fields of a model
 * taking a slot at once wait for each other). Returns the slot, or undefined when the model's
 * slots of that kind are all taken.
 */
export async function assignSlot(db: Db, field: SlottedField): Promise<{ slot: string; xid: string } | undefined> {
  const kind = slotKind(field.type);
  if (kind === undefined) return undefined;
  const assign = async (trx: Db) => {
    await sql`select id from data_models where id = ${field.data_model_id} for no key update`.execute(trx);
    const { rows } = await sql<{
      slot: string | null;
    }>`select slot from data_model_fields where data_model_id = ${field.data_model_id} and id <> ${field.id} and slot is not null`.execute(trx);
    const taken = new Set(rows.map((r) => r.slot));
    const own = (await sql<{ slot: string | null }>`select slot from data_model_fields where id = ${field.id}`.execute(trx)).rows[0]?.slot ?? null;
    const free = own !== null && kindOf(own) === kind ? own : ALL_SLOTS.find((s) => kindOf(s) === kind && !taken.has(s));
    if (free === undefined) return undefined;
    const { rows: x } = await sql<{ xid: string }>`update data_model_fields set slot = ${free}, slot_ready = false where id = ${field.id}
      returning (pg_current_xact_id()::text::bigint % 4294967296)::text as xid`.execute(trx);
    return { slot: free, xid: x[0]!.xid };
  };
  return db.isTransaction ? assign(db) : db.transaction().execute(assign);
}

/** How many slots of `kind` the model has free, counting the field's own slot as free. */
export async function freeSlots(db: Db, dataModelId: string, kind: SlotKind, fieldId?: string): Promise<number> {
  const { rows } = await sql<{ n: number }>`select count(*)::int as n from data_model_fields
    where data_model_id = ${dataModelId} and slot like ${`${kind}\\_%`} and id is distinct from ${fieldId ?? null}::uuid`.execute(db);
  return SLOT_COUNTS[kind] - rows[0]!.n;
}

/** Frees the field's slot (readers go back to `data`); returns the slot it had and the freeing transaction. */
export async function releaseSlot(db: Db, fieldId: string): Promise<{ slot: string; xid: string } | undefined> {
  const { rows } = await sql<{ slot: string | null; xid: string }>`
    update data_model_fields f set slot = null, slot_ready = false from data_model_fields o
    where f.id = ${fieldId} and o.id = f.id returning o.slot, (pg_current_xact_id()::text::bigint % 4294967296)::text as xid`.execute(db);
  const r = rows[0];
  return r?.slot ? { slot: r.slot, xid: r.xid } : undefined;
}

export async function markSlotReady(db: Db, fieldId: string, slot: string): Promise<void> {
  await sql`update data_model_fields set slot_ready = true where id = ${fieldId} and slot = ${slot}`.execute(db);
}

/**
 * Waits until every statement that may have read the slot assignments before they changed has
 * ended (PostgreSQL; PGlite runs one statement at a time): after this, every writer fills the
 * slot, and the backfill that follows sees every row written without it. A snapshot older
 * than the change shows as a backend_xmin not newer than the changing transaction's id.
 */
export async function waitForOlderWriters(db: Db, engine: 'postgres' | 'pglite', changedBy: string, timeoutMs = 600_000): Promise<void> {
  if (engine !== 'postgres') return;
  const started = Date.now();
  for (;;) {
    const { rows } = await sql<{ n: number }>`select count(*)::int as n from pg_stat_activity
      where pid <> pg_backend_pid() and datname = current_database() and backend_type = 'client backend' and backend_xmin is not null and age(backend_xmin) >= age(${changedBy}::xid)`.execute(
      db,
    );
    if (rows[0]!.n === 0) return;
    if (Date.now() - started > timeoutMs) throw new Error('typed slots: statements older than the slot change are still running');
    await new Promise((r) => setTimeout(r, 50));
  }
}

export const BACKFILL_BATCH = 5_000;

/**
 * Sets `slot` on every stored fact and current row of the model to the field's value (null:
 * clears it), in batches of `batch` rows, each its own statement, walking the tables' keys so
 * no batch rereads the ones before. A row a writer changes meanwhile is recomputed from its
 * new version (the update re-reads a row it waited for).
 */
export async function backfillSlot(
  db: Db,
  field: { data_model_id: string; name: string; type: FieldType | null },
  slot: string | null,
  target: string,
  batch = BACKFILL_BATCH,
): Promise<number> {
  const kind = kindOf(target);
  const col = sql.id(target);
  const value = (alias: string) =>
    slot === null
      ? sql`null`
      : slotValue(kind, sql.ref(`${alias}.data`) as Frag, sql`${field.name}::text`, sql`${field.type === 'boolean' ? 'boolean' : 'string'}::text`);
  let total = 0;
  let after: { t: string; id: string } | undefined;
  for (;;) {
    const from = after === undefined ? sql`true` : sql`(observed_at, id) > (${after.t}::timestamptz, ${after.id}::uuid)`;
    const { rows } = await sql<{ t: string; id: string; n: number }>`
      with b as (select id, observed_at from facts where data_model_id = ${field.data_model_id} and ${from} order by observed_at, id limit ${batch}),
      u as (update facts f set ${col} = ${value('f')} from b where f.id = b.id and f.data_model_id = ${field.data_model_id} returning 1)
      select l.t, l.id, (select count(*)::int from b) as n
      from (select to_char(observed_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as t, id from b order by observed_at desc, id desc limit 1) l`.execute(
      db,
    );
    const r = rows[0];
    if (r === undefined) break;
    total += r.n;
    if (r.n < batch) break;
    after = { t: r.t, id: r.id };
  }
  let key: { axis: string; entity_key: string } | undefined;
  for (;;) {
    const from = key === undefined ? sql`true` : sql`(axis, entity_key) > (${key.axis}::text, ${key.entity_key}::text)`;
    const { rows } = await sql<{ axis: string; entity_key: string; n: number }>`
      with b as (select axis, entity_key from fact_current where data_model_id = ${field.data_model_id} and ${from} order by axis, entity_key limit ${batch}),
      u as (update fact_current c set ${col} = ${value('c')} from b where c.data_model_id = ${field.data_model_id} and c.axis = b.axis and c.entity_key = b.entity_key returning 1)
      select l.axis, l.entity_key, (select count(*)::int from b) as n from (select axis, entity_key from b order by axis desc, entity_key desc limit 1) l`.execute(
      db,
    );
    const r = rows[0];
    if (r === undefined || r.n < batch) break;
    key = { axis: r.axis, entity_key: r.entity_key };
  }
  return total;
}

/**
 * Fills every assigned slot of the model from `data` again: for rows that reached facts or
 * fact_current other than through the writer (a bulk load of a benchmark or a test fixture).
 */
export async function refillSlots(db: Db, dataModelId: string): Promise<void> {
  const fields = await db
    .selectFrom('data_model_fields')
    .select(['data_model_id', 'name', 'type', 'slot'])
    .where('data_model_id', '=', dataModelId)
    .where('slot', 'is not', null)
    .execute();
  for (const f of fields) await backfillSlot(db, f, f.slot, f.slot!);
}
