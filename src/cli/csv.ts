/**
 * RFC 4180 CSV of facts: CRLF line endings; a value holding a comma, a double quote, CR or LF
 * is quoted with its quotes doubled. A missing or null value is an empty field and the empty
 * string is `""`, so the two stay apart. Map (and other object) values are their JSON text.
 */
import type { Fact } from '../../packages/client/src/index.ts';

export const FACT_COLUMNS = ['id', 'entity_id', 'observed_at', 'inserted_at'] as const;

const NEEDS_QUOTES = /[",\r\n]/;

/** One field of a record. */
export function csvField(value: string | null): string {
  if (value === null) return '';
  if (value === '') return '""';
  return NEEDS_QUOTES.test(value) ? `"${value.replaceAll('"', '""')}"` : value;
}

export function csvRecord(values: ReadonlyArray<string | null>): string {
  return `${values.map(csvField).join(',')}\r\n`;
}

/** A field's value as CSV text: strings as they are, numbers and booleans as JSON writes them, objects as JSON. */
export function csvValue(v: unknown): string | null {
  if (v === null || v === undefined) return null;
  if (typeof v === 'string') return v;
  return JSON.stringify(v);
}

/**
 * The header: the fact's own columns, then the model's fields in order. A field named like
 * one of the fact's columns is `data.<name>`, so that no two columns share a name.
 */
export function csvHeader(fields: readonly string[]): string[] {
  const own = new Set<string>(FACT_COLUMNS);
  return [...FACT_COLUMNS, ...fields.map((f) => (own.has(f) ? `data.${f}` : f))];
}

export function csvRow(fact: Fact, fields: readonly string[]): string {
  const values: Array<string | null> = [fact.id, fact.entityId, fact.observedAt, fact.insertedAt];
  for (const f of fields) values.push(csvValue(Object.hasOwn(fact.data, f) ? fact.data[f] : null));
  return csvRecord(values);
}
