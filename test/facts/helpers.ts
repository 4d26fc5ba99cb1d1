/** Shared by the fact store tests: models made directly in the tables, and fact_current recomputed from history. */
import { randomBytes } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import type { DB, FieldType } from '../../src/db/tables.ts';
import { uuidv7 } from '../../src/ids.ts';
import type { Tenant } from '../helpers/app.ts';

export interface FieldSpec {
  name: string;
  type: FieldType | null;
  is_primary_key?: boolean;
  is_required?: boolean;
}

export interface TestModel {
  id: string;
  slug: string;
  fields: Array<{ name: string; type: FieldType | null; is_primary_key: boolean; is_required: boolean }>;
}

export async function createModel(
  db: Kysely<DB>,
  tenant: Pick<Tenant, 'organizationId' | 'workspaceId'>,
  fields: FieldSpec[],
  opts: { slug?: string; retentionDays?: number | null } = {},
): Promise<TestModel> {
  const id = uuidv7();
  const slug = opts.slug ?? `m-${randomBytes(5).toString('hex')}`;
  await db
    .insertInto('data_models')
    .values({
      id,
      organization_id: tenant.organizationId,
      workspace_id: tenant.workspaceId,
      name: slug,
      slug,
      description: null,
      retention_days: opts.retentionDays ?? null,
    })
    .execute();
  const full = fields.map((f) => ({ name: f.name, type: f.type, is_primary_key: f.is_primary_key ?? false, is_required: f.is_required ?? false }));
  if (full.length > 0) {
    await db
      .insertInto('data_model_fields')
      .values(
        full.map((f) => ({
          id: uuidv7(),
          organization_id: tenant.organizationId,
          workspace_id: tenant.workspaceId,
          data_model_id: id,
          label: f.name,
          description: null,
          constraints: null,
          ...f,
        })),
      )
      .execute();
  }
  return { id, slug, fields: full };
}

export interface CurrentRow {
  axis: string;
  entity_key: string;
  fact_id: string;
  entity_id: string | null;
  observed_at: string;
  inserted_at: string;
  data: string;
}

const asText = (rows: Array<Record<string, unknown>>): CurrentRow[] =>
  rows
    .map((r) => ({
      axis: String(r.axis),
      entity_key: String(r.entity_key),
      fact_id: String(r.fact_id),
      entity_id: r.entity_id === null ? null : String(r.entity_id),
      observed_at: (r.observed_at as Date).toISOString(),
      inserted_at: (r.inserted_at as Date).toISOString(),
      data: JSON.stringify(r.data),
    }))
    .sort((a, b) => (a.axis + a.entity_key < b.axis + b.entity_key ? -1 : a.axis + a.entity_key > b.axis + b.entity_key ? 1 : 0));

/** fact_current of a model as stored. */
export async function storedCurrent(db: Kysely<DB>, dataModelId: string): Promise<CurrentRow[]> {
  const { rows } = await sql<Record<string, unknown>>`
    select axis, entity_key, fact_id::text as fact_id, entity_id, observed_at, inserted_at, data
    from fact_current where data_model_id = ${dataModelId}
  `.execute(db);
  return asText(rows);
}

/** fact_current of a model as it must be: recomputed from the whole history with DISTINCT ON. */
export async function recomputedCurrent(db: Kysely<DB>, dataModelId: string): Promise<CurrentRow[]> {
  const { rows } = await sql<Record<string, unknown>>`
    select * from (
      (select distinct on (entity_key) 'observed_at' as axis, coalesce(entity_id, '#' || id::text) as entity_key,
              id::text as fact_id, entity_id, observed_at, inserted_at, data
       from facts where data_model_id = ${dataModelId}
       order by entity_key, observed_at desc, inserted_at desc, id desc)
      union all
      (select distinct on (entity_key) 'inserted_at' as axis, coalesce(entity_id, '#' || id::text) as entity_key,
              id::text as fact_id, entity_id, observed_at, inserted_at, data
       from facts where data_model_id = ${dataModelId}
       order by entity_key, inserted_at desc, id desc)
    ) s
  `.execute(db);
  return asText(rows);
}

export async function factCount(db: Kysely<DB>, dataModelId: string): Promise<number> {
  const { rows } = await sql<{ n: number }>`select count(*)::int as n from facts where data_model_id = ${dataModelId}`.execute(db);
  return rows[0]!.n;
}

/** An ISO instant `days` before now (negative: after). */
export function daysAgo(days: number, plusMs = 0): string {
  return new Date(Date.now() - days * 86_400_000 + plusMs).toISOString();
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
