/**
 * GraphQL test helpers: a graphql-request client that never throws (tests assert on the
 * status, codes and headers), data models inserted directly, and facts seeded either
 * through the fact writer (src/facts/write.ts, once it exists) or by direct inserts plus a
 * recomputation of fact_current from the history. That recomputation is also the
 * reference the writer's fact_current is compared with.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { sql } from 'kysely';
import { ClientError, GraphQLClient } from 'graphql-request';
import type { Deps } from '../../src/deps.ts';
import type { Db } from '../../src/db/connect.ts';
import type { FieldType } from '../../src/db/tables.ts';
import { uuidv7 } from '../../src/ids.ts';
import { createFieldIndex } from '../../src/facts/field-index.sql.ts';
import { refillSlots } from '../../src/facts/slots.sql.ts';
import type { TestApp, Tenant } from '../helpers/app.ts';

export interface GqlError {
  message: string;
  path?: (string | number)[];
  extensions?: { code?: string; [k: string]: unknown };
}

export interface GqlResponse<T = any> {
  status: number;
  headers: Headers;
  data: T | null | undefined;
  errors: GqlError[] | undefined;
}

export function gqlClient(t: TestApp, token?: string, extraHeaders: Record<string, string> = {}): GraphQLClient {
  const headers: Record<string, string> = { ...extraHeaders };
  if (token !== undefined) headers.authorization = `Bearer ${token}`;
  return new GraphQLClient(`${t.url}/api/graphql`, { headers, errorPolicy: 'all' });
}

/** Runs a document and returns the response whatever its status. */
export async function gql<T = any>(client: GraphQLClient, query: string, variables?: Record<string, unknown>): Promise<GqlResponse<T>> {
  try {
    const r = await client.rawRequest<T>(query, variables);
    return { status: r.status, headers: r.headers as Headers, data: r.data, errors: r.errors as GqlError[] | undefined };
  } catch (err) {
    if (err instanceof ClientError) {
      const res = err.response as unknown as { status: number; headers: Headers; data?: T; errors?: GqlError[] };
      return { status: res.status, headers: res.headers, data: res.data, errors: res.errors };
    }
    throw err;
  }
}

/** The one error code of a response, asserting there is exactly one error. */
export function onlyCode(r: GqlResponse): string | undefined {
  if (r.errors?.length !== 1) throw new Error(`expected one error, got ${JSON.stringify(r.errors)} (status ${r.status})`);
  return r.errors[0]!.extensions?.code;
}

export interface FieldSpec {
  name: string;
  type: FieldType | null;
  is_primary_key?: boolean;
  is_required?: boolean;
  /** With its index on fact_current, built as the service builds it. */
  is_indexed?: boolean;
}

export interface Model {
  id: string;
  slug: string;
  organizationId: string;
  workspaceId: string;
  fields: FieldSpec[];
}

export function uniqueSlug(prefix = 'm'): string {
  return `${prefix}-${randomBytes(5).toString('hex')}`;
}

export async function createModel(deps: Deps, tenant: Pick<Tenant, 'organizationId' | 'workspaceId'>, slug: string, fields: FieldSpec[]): Promise<Model> {
  const id = uuidv7();
  await deps.db
    .insertInto('data_models')
    .values({ id, organization_id: tenant.organizationId, workspace_id: tenant.workspaceId, name: slug, slug, description: null, retention_days: null })
    .execute();
  if (fields.length > 0) {
    const rows = await deps.db
      .insertInto('data_model_fields')
      .values(
        fields.map((f) => ({
          id: uuidv7(),
          organization_id: tenant.organizationId,
          workspace_id: tenant.workspaceId,
          data_model_id: id,
          name: f.name,
          label: f.name,
          description: null,
          type: f.type,
          is_primary_key: f.is_primary_key ?? false,
          is_required: f.is_required ?? false,
          is_indexed: f.is_indexed ?? false,
          constraints: null,
        })),
      )
      .returningAll()
      .execute();
    for (const row of rows) if (row.is_indexed) await createFieldIndex(deps.db, deps.engine === 'postgres' ? 'concurrent' : 'plain', row);
  }
  return { id, slug, organizationId: tenant.organizationId, workspaceId: tenant.workspaceId, fields };
}

export interface SeedFact {
  id?: string;
  entity_id: string | null;
  observed_at: string | number | Date;
  inserted_at?: string | number | Date;
  data: Record<string, unknown>;
}

export interface StoredFact {
  id: string;
  entity_id: string | null;
  observed_at: string;
  inserted_at: string;
  data: Record<string, unknown>;
}

const iso = (d: string | number | Date) => new Date(d).toISOString();

/** Inserts facts as given (ids, timestamps, order) and rebuilds the model's fact_current. */
export async function insertFacts(deps: Deps, model: Model, facts: SeedFact[]): Promise<StoredFact[]> {
  const now = new Date().toISOString();
  const stored: StoredFact[] = facts.map((f) => ({
    id: f.id ?? uuidv7(),
    entity_id: f.entity_id,
    observed_at: iso(f.observed_at),
    inserted_at: f.inserted_at === undefined ? now : iso(f.inserted_at),
    data: f.data,
  }));
  for (let i = 0; i < stored.length; i += 500) {
    await deps.db
      .insertInto('facts')
      .values(
        stored.slice(i, i + 500).map((f) => ({
          id: f.id,
          organization_id: model.organizationId,
          workspace_id: model.workspaceId,
          data_model_id: model.id,
          entity_id: f.entity_id,
          observed_at: f.observed_at,
          inserted_at: f.inserted_at,
          data: JSON.stringify(f.data),
          source_key: `test:${f.id}`,
        })),
      )
      .execute();
  }
  await rebuildCurrent(deps.db, model.id);
  return stored;
}

/** fact_current as the latest-per-entity rule defines it (newest observed_at, then inserted_at, then id), computed from the history. */
function currentFromHistory(modelId: string) {
  return sql`
    (select distinct on (entity_key) data_model_id, 'observed_at' as axis, entity_key, id as fact_id, workspace_id, entity_id, observed_at, inserted_at, data
      from (select f.*, coalesce(f.entity_id, '#' || f.id::text) as entity_key from facts f where f.data_model_id = ${modelId}) x
      order by entity_key, observed_at desc, inserted_at desc, id desc)
    union all
    (select distinct on (entity_key) data_model_id, 'inserted_at' as axis, entity_key, id as fact_id, workspace_id, entity_id, observed_at, inserted_at, data
      from (select f.*, coalesce(f.entity_id, '#' || f.id::text) as entity_key from facts f where f.data_model_id = ${modelId}) x
      order by entity_key, inserted_at desc, id desc)`;
}

export async function rebuildCurrent(db: Db, modelId: string): Promise<void> {
  await sql`delete from fact_current where data_model_id = ${modelId}`.execute(db);
  await sql`insert into fact_current (data_model_id, axis, entity_key, fact_id, workspace_id, entity_id, observed_at, inserted_at, data) ${currentFromHistory(modelId)}`.execute(
    db,
  );
  // Rows inserted here bypass the writer, which fills the typed slots of indexed fields.
  await refillSlots(db, modelId);
}

export interface CurrentRow {
  axis: string;
  entity_key: string;
  fact_id: string;
}

/** [stored, expected] fact_current rows of a model, sorted, for comparing a writer's result with the definition. */
export async function currentVersusHistory(db: Db, modelId: string): Promise<[CurrentRow[], CurrentRow[]]> {
  const stored = await sql<CurrentRow>`select axis, entity_key, fact_id from fact_current where data_model_id = ${modelId} order by axis, entity_key`.execute(
    db,
  );
  const expected = await sql<CurrentRow>`select axis, entity_key, fact_id from (${currentFromHistory(modelId)}) c order by axis, entity_key`.execute(db);
  return [stored.rows, expected.rows];
}

export type WriteFacts = (
  db: Db,
  scope: { organizationId: string; workspaceId: string },
  model: { id: string; fields: { name: string; type: FieldType | null; is_primary_key: boolean; is_required: boolean }[] },
  items: { observed_at: string; data: Record<string, unknown>; source_key?: string }[],
) => Promise<unknown>;

/** The fact writer of src/facts/write.ts when another engineer has landed it; undefined until then. */
export async function loadWriter(): Promise<WriteFacts | undefined> {
  const file = new URL('../../src/facts/write.ts', import.meta.url);
  if (!fs.existsSync(file)) return undefined;
  const mod = (await import(file.href)) as { writeFacts?: WriteFacts };
  return mod.writeFacts;
}

/** Facts as the API returns them, for comparing with expectations. */
export interface ApiFact {
  id: string;
  dataModelId: string;
  entityId: string | null;
  observedAt: string;
  insertedAt: string;
  data: string;
}

export const FACT_FIELDS = 'id dataModelId entityId observedAt insertedAt data';

/**
 * Runs `fn` while `onStatement` sees the SQL of every statement on the fact tables, before
 * it runs: to record them, or to fail them by throwing.
 */
export async function onFactStatements(t: TestApp, onStatement: (sqlText: string) => void, fn: () => Promise<unknown>): Promise<void> {
  const original = t.deps.db;
  t.deps.db = original.withPlugin({
    transformQuery(args) {
      const text = original.getExecutor().compileQuery(args.node, args.queryId).sql.trim();
      if (/fact_current|facts/.test(text)) onStatement(text);
      return args.node;
    },
    async transformResult(args) {
      return args.result;
    },
  });
  try {
    await fn();
  } finally {
    t.deps.db = original;
  }
}
