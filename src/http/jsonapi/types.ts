/**
 * Glossary of the JSON:API layer.
 * - ResourceSpec: the declaration of one public type: its table, its public attribute
 *   allow-list and relationships. It drives serialization, `fields`, `include`,
 *   `filter` and `sort`; nothing outside the list is ever read from or written to a row.
 * - ParsedQuery: the validated form of a request's query string.
 */

/** How a public attribute is typed: used to coerce filter values and to validate input. */
export type AttrKind = 'string' | 'integer' | 'boolean' | 'datetime' | 'uuid' | 'enum' | 'json' | 'string_array';

export interface AttrSpec {
  /** Column of the resource's table that holds the value. */
  column: string;
  kind: AttrKind;
  /** Allowed values for kind 'enum' (and for each element of 'string_array'). */
  values?: readonly string[];
  /** May appear in `filter[...]`. json attributes never can. */
  filter?: boolean;
  /** May appear in `sort`. */
  sort?: boolean;
  nullable?: boolean;
  /** Can take megabytes: a list leaves it out of its select unless a sparse fieldset asks for it. */
  large?: boolean;
}

export interface RelationshipSpec {
  /** Resource type of the related object(s). */
  type: string;
  /** to-one: `column` on this row holds the related id. to-many: `foreignKey` on the related table points back. */
  kind: 'one' | 'many';
  column?: string;
  foreignKey?: string;
}

export type JsonApiFilterOp = 'eq' | 'ne' | 'gt' | 'gte' | 'lt' | 'lte' | 'in' | 'is_null' | 'contains';

export interface JsonApiFilter {
  attr: string;
  /** The column the attribute maps to, resolved from the spec. */
  column: string;
  kind: AttrKind;
  op: JsonApiFilterOp;
  /** Already coerced to the attribute's kind: string | number | boolean | Date; an array for `in`; boolean for `is_null`. */
  value: unknown;
}

export interface SortKey {
  attr: string;
  column: string;
  kind: AttrKind;
  desc: boolean;
}

/** A keyset cursor: the sort key values of a row followed by its id. */
export interface Cursor {
  values: unknown[];
  id: string;
}

export type Page =
  | { kind: 'offset'; limit: number; offset: number }
  | { kind: 'keyset'; limit: number; after?: Cursor; before?: Cursor };

export interface ParsedQuery {
  /** Relationship paths, e.g. [['fields'], ['user', 'memberships']]. */
  include: string[][];
  /** Sparse fieldsets: type -> attribute (and relationship) names to keep. */
  fields: Map<string, Set<string>>;
  filter: JsonApiFilter[];
  /** Never empty: defaults to -inserted_at; the id tie-breaker is implied, not listed. */
  sort: SortKey[];
  page: Page;
  /** page[count]=true */
  count: boolean;
}

export interface ResourceSpec {
  type: string;
  table: string;
  /**
   * A column holding what a row's large attributes take as text: a list then fetches only
   * the rows whose running total fits LIST_MAX_BYTES (read.sql.ts), not a page of documents.
   */
  answerBytesColumn?: string;
  attributes: Readonly<Record<string, AttrSpec>>;
  relationships: Readonly<Record<string, RelationshipSpec>>;
}
