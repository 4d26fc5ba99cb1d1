/**
 * A JSON:API type as the generic layer sees it: the public spec plus the two things only
 * the resource knows: which rows a caller may see, and how a row presents its attributes.
 */
import type { SelectQueryBuilder } from 'kysely';
import type { Principal } from '../../auth/principal.ts';
import type { ResourceSpec } from './types.ts';

export type AnyQuery = SelectQueryBuilder<any, any, any>;

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

const registry = new Map<string, ResourceType>();

export function registerType(type: ResourceType): ResourceType {
  registry.set(type.type, type);
  return type;
}

export function lookupType(name: string): ResourceType | undefined {
  return registry.get(name);
}

export function getType(name: string): ResourceType {
  const t = registry.get(name);
  if (!t) throw new Error(`unknown resource type ${name}`);
  return t;
}
