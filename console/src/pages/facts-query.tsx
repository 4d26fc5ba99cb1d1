/**
 * What the Facts views share: the data model as the JSON:API describes it, the GraphQL
 * document a view sends (built from exactly the variables it uses, so the text shown is the
 * text sent), the curl line for it, and the filter operators each field type allows
 * (docs/graphql.md, "Filters").
 */
import type { FactPage, TributaryClient } from '@tributary/client';
import { Copyable, Section } from '../ui/index.tsx';

export type FieldType = 'string' | 'integer' | 'boolean' | 'datetime' | 'float' | 'map' | null;

export interface ModelField {
  id: string;
  name: string;
  label: string;
  type: FieldType;
  isPrimaryKey: boolean;
}

export interface Model {
  id: string;
  name: string;
  slug: string;
  description: string | null;
  fields: ModelField[];
}

export interface Condition {
  field: string;
  op: string;
  value?: unknown;
}

interface Resource {
  type: string;
  id: string;
  attributes?: Record<string, unknown>;
  relationships?: Record<string, { data?: Array<{ id: string }> | { id: string } | null }>;
}

function toModel(r: Resource, included: Resource[]): Model {
  const a = r.attributes ?? {};
  const linked = r.relationships?.fields?.data;
  const ids = new Set(Array.isArray(linked) ? linked.map((l) => l.id) : []);
  const fields = included
    .filter((i) => i.type === 'data_model_field' && (ids.has(i.id) || i.attributes?.data_model_id === r.id))
    // The order they were made in: usually the order their author thinks of them in.
    .sort((x, y) => String(x.attributes?.inserted_at ?? '').localeCompare(String(y.attributes?.inserted_at ?? '')) || x.id.localeCompare(y.id))
    .map((i) => ({
      id: i.id,
      name: String(i.attributes?.name ?? ''),
      label: String(i.attributes?.label ?? i.attributes?.name ?? ''),
      type: (i.attributes?.type ?? null) as FieldType,
      isPrimaryKey: i.attributes?.is_primary_key === true,
    }));
  return { id: r.id, name: String(a.name ?? ''), slug: String(a.slug ?? ''), description: (a.description as string | null) ?? null, fields };
}

export async function loadModels(client: TributaryClient): Promise<Model[]> {
  const doc = (await client.request('GET', '/data_models?sort=name&include=fields&page[limit]=250')) as { data: Resource[]; included?: Resource[] };
  return doc.data.map((r) => toModel(r, doc.included ?? []));
}

/** The data model with this slug, or null when the workspace has none. */
export async function loadModel(client: TributaryClient, slug: string): Promise<Model | null> {
  const doc = (await client.request('GET', `/data_models?filter[slug]=${encodeURIComponent(slug)}&include=fields`)) as {
    data: Resource[];
    included?: Resource[];
  };
  const r = doc.data[0];
  return r ? toModel(r, doc.included ?? []) : null;
}

export const isNumeric = (f: ModelField) => f.type === 'integer' || f.type === 'float';

/** The operators docs/graphql.md allows on a field of this type, in the order a person reaches for them. */
export function opsFor(type: FieldType): string[] {
  const all = ['eq', 'ne', 'in', 'nin', 'is_null'];
  if (type === 'integer' || type === 'float' || type === 'datetime') return ['eq', 'ne', 'gt', 'gte', 'lt', 'lte', 'in', 'nin', 'is_null'];
  if (type === 'string') return ['eq', 'ne', 'contains', 'starts_with', 'in', 'nin', 'is_null'];
  return all;
}

export const OP_LABELS: Record<string, string> = {
  eq: 'equals',
  ne: 'does not equal',
  gt: 'greater than',
  gte: 'at least',
  lt: 'less than',
  lte: 'at most',
  in: 'is one of',
  nin: 'is none of',
  is_null: 'is empty',
  contains: 'contains',
  starts_with: 'starts with',
};

/** One value typed in a form, as the field's type wants it; throws a sentence when it cannot be. */
function scalar(text: string, type: FieldType, field: string): unknown {
  const t = text.trim();
  switch (type) {
    case 'integer':
    case 'float': {
      const n = Number(t);
      if (t === '' || !Number.isFinite(n) || (type === 'integer' && !Number.isInteger(n)))
        throw new Error(`${field} takes ${type === 'integer' ? 'a whole number' : 'a number'}, not "${t}"`);
      return n;
    }
    case 'boolean':
      if (t !== 'true' && t !== 'false') throw new Error(`${field} takes true or false`);
      return t === 'true';
    case 'map':
      try {
        return JSON.parse(t);
      } catch {
        throw new Error(`${field} takes a JSON object`);
      }
    case null:
      // A field without a type takes any JSON value; plain words are a string.
      try {
        return JSON.parse(t);
      } catch {
        return text;
      }
    default:
      return text;
  }
}

/** The condition's value from the form's text: a list for in/nin (comma-separated), a boolean for is_null. */
export function parseValue(op: string, text: string, field: ModelField): unknown {
  if (op === 'is_null') return text !== 'false';
  if (op === 'in' || op === 'nin') {
    if (field.type === 'map' || field.type === null) {
      try {
        const list: unknown = JSON.parse(text);
        if (Array.isArray(list)) return list;
      } catch {
        /* not a JSON list: split on commas below */
      }
    }
    return text
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s !== '')
      .map((s) => scalar(s, field.type, field.name));
  }
  return scalar(text, field.type, field.name);
}

export function describeCondition(c: Condition): string {
  const v = c.op === 'is_null' ? '' : ` ${Array.isArray(c.value) ? c.value.map((x) => JSON.stringify(x)).join(', ') : JSON.stringify(c.value)}`;
  return `${c.field} ${OP_LABELS[c.op] ?? c.op}${c.op === 'is_null' && c.value === false ? ' (no: has a value)' : ''}${v}`;
}

/** The conditions kept in the route (`filters=` holds the same JSON the API takes); bad text is no conditions. */
export function conditionsFrom(query: URLSearchParams): Condition[] {
  const text = query.get('filters');
  if (!text) return [];
  try {
    const v: unknown = JSON.parse(text);
    return Array.isArray(v) ? v.filter((c): c is Condition => typeof c === 'object' && c !== null && typeof (c as Condition).field === 'string') : [];
  } catch {
    return [];
  }
}

/** factQuery's variables, as the SDK takes them and the API reads them. */
export type Variables = Record<string, string | number>;

const TYPES: Record<string, string> = { dataModelSlug: 'String!', limit: 'Int', offset: 'Int', since: 'DateTime', until: 'DateTime' };

/**
 * A document that declares and passes exactly the variables given: what the console sends
 * is what it shows, and pasting both into another client asks the same question.
 */
export function factDocument(name: string, variables: Variables): string {
  const keys = Object.keys(variables);
  const decl = keys.map((k) => `$${k}: ${TYPES[k] ?? 'String'}`).join(', ');
  const args = keys.map((k) => `${k}: $${k}`).join(', ');
  return [
    `query ${name}(${decl}) {`,
    `  factQuery(${args}) {`,
    '    count pageNumber lastPage limit hasNextPage hasPreviousPage',
    '    results { id entityId observedAt insertedAt data }',
    '  }',
    '}',
  ].join('\n');
}

export interface Fact {
  id: string;
  entityId: string | null;
  observedAt: string;
  insertedAt: string;
  data: Record<string, unknown>;
}

export interface Answer {
  page: Omit<FactPage, 'results'>;
  facts: Fact[];
}

export async function runFactQuery(client: TributaryClient, document: string, variables: Variables): Promise<Answer> {
  // The SDK's variable type names factQuery's arguments; ours are the same names.
  const doc = await client.factQuery<{ factQuery: FactPage | null }>(document, variables as unknown as Parameters<TributaryClient['factQuery']>[1]);
  const page = doc.factQuery;
  if (!page) throw new Error('The API answered no page of facts.');
  const facts = (page.results ?? []).map((r) => {
    let data: Record<string, unknown> = {};
    try {
      data = JSON.parse(r.data) as Record<string, unknown>;
    } catch {
      /* Json is always a JSON document; an unreadable one shows as empty */
    }
    return { id: r.id, entityId: r.entityId ?? null, observedAt: r.observedAt, insertedAt: r.insertedAt, data };
  });
  return { page, facts };
}

/** A shell word in single quotes, safe whatever it holds. */
const shellQuote = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;

/** A curl line for the query; `$TOKEN` stands for the reader's token, never ours. */
export function curlLine(document: string, variables: Readonly<Record<string, unknown>>): string {
  const body = JSON.stringify({ query: document, variables });
  return [
    `curl -s ${location.origin}/api/graphql \\`,
    '  -H "Authorization: Bearer $TOKEN" \\',
    "  -H 'Content-Type: application/json' \\",
    `  -d ${shellQuote(body)}`,
  ].join('\n');
}

/** The query a view sent, its variables and a curl line, each ready to copy. */
export function ShownQuery(props: { document: string; variables: Readonly<Record<string, unknown>> }) {
  return (
    <Section title="The query behind this view">
      <p class="muted small">
        Paste it into any GraphQL client of <code>/api/graphql</code>, with a token of an account that has <code>api_read</code>.
      </p>
      <div class="facts-query">
        <Copyable label="GraphQL query" text={props.document} />
        <Copyable label="Variables" text={JSON.stringify(props.variables, null, 2)} />
        <Copyable label="Curl command" text={curlLine(props.document, props.variables)} />
      </div>
    </Section>
  );
}

/** A field's value in a cell: numbers as numbers, maps as compact JSON, missing as a dash. */
export function showValue(v: unknown): string {
  if (v === undefined || v === null) return '—';
  if (typeof v === 'object') return JSON.stringify(v);
  return String(v);
}
