/**
 * A checked factQuery becomes a FactQueryPlan: its data model slugs resolved inside the
 * caller's workspace (or taken from the models the caller prefetched), its filters typed
 * by the models' fields.
 */
import type { Db } from '../../db/connect.ts';
import type { TimeAxis } from '../../db/tables.ts';
import { loadModels, type DataModelWithFields } from '../models.sql.ts';
import { SLUG_RE } from '../../input.ts';
import { badArgument, typeFilters, type FieldDef, type RawClause } from './filters.ts';
import type { FactQueryPlan } from './plan-types.ts';

/** The arguments of a factQuery, checked for everything that needs no database. */
export interface FactQueryArgs {
  slug: string;
  mode: 'latest' | 'timeline';
  axis: TimeAxis;
  sort: FactQueryPlan['sort'];
  direction: 'asc' | 'desc';
  limit: number;
  offset: number;
  since: Date | undefined;
  until: Date | undefined;
  joinSlug: string | undefined;
  joinType: 'left' | 'inner';
  filters: RawClause[];
  joinFilters: RawClause[];
}

/** Models looked up beforehand (in the account re-check's statement) for these slugs. */
export interface PrefetchedModels {
  /** Every slug looked up: one of these absent from `models` names no model of the workspace. */
  slugs: ReadonlySet<string>;
  models: ReadonlyMap<string, DataModelWithFields>;
}

const UNKNOWN_MODEL = 'does not name a data model of this workspace';

function fieldMap(model: DataModelWithFields): Map<string, FieldDef> {
  return new Map(model.fields.map((f) => [f.name, f]));
}

export async function planFactQuery(db: Db, workspaceId: string, a: FactQueryArgs, prefetched?: PrefetchedModels): Promise<FactQueryPlan> {
  // A malformed slug cannot exist; answering it without a lookup reads the same as an unknown one.
  if (!SLUG_RE.test(a.slug)) throw badArgument(`dataModelSlug ${UNKNOWN_MODEL}`, 'dataModelSlug');
  if (a.joinSlug !== undefined && !SLUG_RE.test(a.joinSlug)) throw badArgument(`joinDataModelSlug ${UNKNOWN_MODEL}`, 'joinDataModelSlug');
  const slugs = a.joinSlug === undefined ? [a.slug] : [a.slug, a.joinSlug];
  const models = prefetched !== undefined && slugs.every((s) => prefetched.slugs.has(s)) ? prefetched.models : await loadModels(db, workspaceId, slugs);
  const model = models.get(a.slug);
  if (!model) throw badArgument(`dataModelSlug ${UNKNOWN_MODEL}`, 'dataModelSlug');
  const joinModel = a.joinSlug === undefined ? undefined : models.get(a.joinSlug);
  if (a.joinSlug !== undefined && !joinModel) throw badArgument(`joinDataModelSlug ${UNKNOWN_MODEL}`, 'joinDataModelSlug');
  return {
    workspaceId,
    model,
    mode: a.mode,
    axis: a.axis,
    since: a.since,
    until: a.until,
    sort: a.sort,
    direction: a.direction,
    limit: a.limit,
    offset: a.offset,
    filters: typeFilters(a.filters, fieldMap(model), 'filters', model.slug),
    join: joinModel
      ? { model: joinModel, type: a.joinType, filters: typeFilters(a.joinFilters, fieldMap(joinModel), 'joinFilters', joinModel.slug) }
      : undefined,
  };
}
