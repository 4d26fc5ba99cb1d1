/**
 * A widget config (or the Facts page's group-by choices, which are one) as the factAggregate
 * request it means: a document that declares exactly the variables it passes, so the query
 * shown is the query sent, and the typed answer read into rows a chart or a table draws.
 */
import type { TributaryClient } from '@tributary/client';
import { CONFIG_ARGUMENTS, measureName, windowMs, type WidgetConfig } from '../../../src/resources/dashboard_widgets/widget-config.ts';

export { measureName, type WidgetConfig };

/** The GraphQL types of factAggregate's arguments (docs/graphql.md). */
const TYPES: Record<string, string> = {
  dataModelSlug: 'String!',
  since: 'DateTime',
  until: 'DateTime',
  groupBy: '[String!]',
  series: 'Boolean',
  measures: '[FactMeasureInput!]',
  orderBy: '[FactAggregateOrderInput!]',
  limit: 'Int',
};

/** factAggregate's arguments in its order, so two configs that mean the same send the same text. */
const ARG_ORDER: readonly string[] = ['dataModelSlug', 'since', ...CONFIG_ARGUMENTS];

export type AggregateVariables = Record<string, unknown>;

export interface AggregateRequest {
  document: string;
  variables: AggregateVariables;
}

/**
 * The request for `config` over the model `slug` at `now`: a window becomes `since` (now
 * minus the window, to the second) and `until` stays unset, the API's now; filters travel as
 * the JSON text factAggregate takes.
 */
export function aggregateRequest(name: string, slug: string, config: WidgetConfig, now: number): AggregateRequest {
  const v: AggregateVariables = { dataModelSlug: slug };
  const { window, measure: _measure, unit: _unit, colors: _colors, filters, joinFilters, ...args } = config;
  for (const [k, val] of Object.entries(args)) if (val !== undefined) v[k] = val;
  if (filters !== undefined && filters.length > 0) v.filters = JSON.stringify(filters);
  if (joinFilters !== undefined && joinFilters.length > 0) v.joinFilters = JSON.stringify(joinFilters);
  const span = window === undefined ? undefined : windowMs(window);
  if (span !== undefined) v.since = new Date(Math.floor((now - span) / 1000) * 1000).toISOString();
  const variables = Object.fromEntries(Object.entries(v).sort(([a], [b]) => ARG_ORDER.indexOf(a) - ARG_ORDER.indexOf(b)));
  const keys = Object.keys(variables);
  const decl = keys.map((k) => `$${k}: ${TYPES[k] ?? 'String'}`).join(', ');
  const call = keys.map((k) => `${k}: $${k}`).join(', ');
  const document = [
    `query ${name}(${decl}) {`,
    `  factAggregate(${call}) {`,
    '    groupBy measures groupsCut',
    '    groups { keys { field string number boolean dateTime json } bucket values { name value } }',
    '  }',
    '}',
  ].join('\n');
  return { document, variables };
}

export interface GroupKey {
  field: string;
  string: string | null;
  number: number | null;
  boolean: boolean | null;
  dateTime: string | null;
  json: unknown;
}

export interface AggregateGroup {
  keys: GroupKey[];
  bucket: string | null;
  values: Array<{ name: string; value: number | null }>;
}

export interface AggregateAnswer {
  groupBy: string[];
  measures: string[];
  groups: AggregateGroup[];
  groupsCut: boolean;
}

export async function runAggregate(client: TributaryClient, request: AggregateRequest): Promise<AggregateAnswer> {
  // The SDK's GraphQL call posts any document; its variable type names factQuery's arguments.
  const data = await client.factQuery<{ factAggregate: AggregateAnswer | null }>(
    request.document,
    request.variables as unknown as Parameters<TributaryClient['factQuery']>[1],
  );
  if (!data.factAggregate) throw new Error('The API answered no aggregate.');
  return data.factAggregate;
}

/** A key as text: the member of its type that is set; a null key (facts without the field) is "(none)". */
export function keyText(k: GroupKey): string {
  if (k.string !== null) return k.string;
  if (k.number !== null) return String(k.number);
  if (k.boolean !== null) return String(k.boolean);
  if (k.dateTime !== null) return k.dateTime;
  if (k.json !== null && k.json !== undefined) return JSON.stringify(k.json);
  return '(none)';
}

/** The keys of a group as one label: "north · open". */
export const groupLabel = (g: AggregateGroup) => (g.keys.length === 0 ? 'all' : g.keys.map(keyText).join(' · '));

/** The value of the measure `name` in a group (null: no fact had the field). */
export function valueOf(g: AggregateGroup, name: string): number | null {
  return g.values.find((v) => v.name === name)?.value ?? null;
}

/** A number for a person: thousands separated, at most 2 decimals. */
export function formatNumber(n: number | null, unit?: string): string {
  if (n === null) return '—';
  const text = n.toLocaleString('en-US', { maximumFractionDigits: 2 });
  return unit ? `${text} ${unit}` : text;
}
