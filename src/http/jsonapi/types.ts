/**
 * The JSON:API layer's own vocabulary: ParsedQuery, the validated form of a request's
 * query string. A type's declaration (ResourceSpec) is resources/resource.ts.
 */
import type { AttrKind } from '../../resources/resource.ts';
import type { FilterOp } from '../../resources/filter.sql.ts';

export type JsonApiFilterOp = FilterOp;

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

export type Page = { kind: 'offset'; limit: number; offset: number } | { kind: 'keyset'; limit: number; after?: Cursor; before?: Cursor };

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
