/**
 * A public type's declaration, as the JSON:API routes and the serializer read it.
 * - ResourceSpec: its table, its public attribute allow-list and relationships. It drives
 *   serialization, `fields`, `include`, `filter` and `sort`; nothing outside the list is
 *   ever read from or written to a row.
 * - ResourceType: the spec plus the two things only the resource knows: which rows a
 *   caller may see, and how a row presents its attributes.
 * Each type declares itself in resources/<type>/resource.ts; resources/types.ts lists them.
 */
import type { Principal } from '../auth/principal.ts';
import type { AnyQuery } from '../db/connect.ts';

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

export interface ResourceSpec {
  type: string;
  table: string;
  /**
   * A column holding what a row's large attributes take as text: a list then fetches only
   * the rows whose running total fits LIST_MAX_BYTES (http/jsonapi/read.sql.ts), not a page of documents.
   */
  answerBytesColumn?: string;
  attributes: Readonly<Record<string, AttrSpec>>;
  relationships: Readonly<Record<string, RelationshipSpec>>;
}

export interface ResourceType extends ResourceSpec {
  /** Collection path segment under /api/json/v1. */
  path: string;
  /**
   * Narrows a select over `table` to the rows the principal may see (tenancy and role). It
   * may read only what a token claims (credentialId, organizationId, workspaceId): the
   * JSON:API reads run it, with those claims, in the statement that re-checks the account.
   */
  visible(qb: AnyQuery, principal: Principal): AnyQuery;
  /**
   * DELETE /<path>/:id is served (204, then 404), with the `${type}.delete` permission of
   * auth/access.ts: the JSON:API surface registers the route and the OpenAPI document lists
   * it from this flag, so the two cannot differ (docs/api.md, "Deleting").
   */
  deletable?: boolean;
  /** Attribute values that are not a plain column copy (defaults, derived values). */
  present?(row: Record<string, any>, now: Date): Record<string, unknown>;
}

/**
 * Every public type by name, built once from a static list (resources/types.ts) and handed
 * to the routes, so that a relationship's type is found whatever was imported first.
 */
export type TypeRegistry = ReadonlyMap<string, ResourceType>;

export function typeRegistry(types: readonly ResourceType[]): TypeRegistry {
  const map = new Map<string, ResourceType>();
  for (const t of types) {
    if (map.has(t.type)) throw new Error(`resource type ${t.type} is declared twice`);
    map.set(t.type, t);
  }
  for (const t of types) {
    for (const [name, rel] of Object.entries(t.relationships)) {
      if (!map.has(rel.type)) throw new Error(`relationship ${t.type}.${name} names the undeclared type ${rel.type}`);
    }
  }
  return map;
}
