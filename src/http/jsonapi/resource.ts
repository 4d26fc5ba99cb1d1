/**
 * A JSON:API type as the generic layer sees it: the public spec plus the two things only
 * the resource knows: which rows a caller may see, and how a row presents its attributes.
 */
import type { Principal } from '../../auth/principal.ts';
import type { AnyQuery } from '../../db/connect.ts';
import type { ResourceSpec } from './types.ts';

export interface ResourceType extends ResourceSpec {
  /** Collection path segment under /api/json/v1. */
  path: string;
  /** Narrows a select over `table` to the rows the principal may see (tenancy and role). */
  visible(qb: AnyQuery, principal: Principal): AnyQuery;
  /** Visibility depends on the caller's role, which a token does not claim (see claimedPrincipal). */
  roleScoped?: boolean;
  /** Attribute values that are not a plain column copy (defaults, derived values). */
  present?(row: Record<string, any>): Record<string, unknown>;
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
    // The budgeted list is built on the named-column select, which role-scoped types do not use.
    if (t.answerBytesColumn !== undefined && t.roleScoped) throw new Error(`resource type ${t.type} is role-scoped and cannot budget its lists`);
    map.set(t.type, t);
  }
  for (const t of types) {
    for (const [name, rel] of Object.entries(t.relationships)) {
      if (!map.has(rel.type)) throw new Error(`relationship ${t.type}.${name} names the undeclared type ${rel.type}`);
    }
  }
  return map;
}
