/**
 * factQuery's resolver: checks the GraphQL arguments, has facts/query plan and run them in
 * the caller's workspace, and shapes the page. Only the
 * statements the selection needs are run: no count unless count or lastPage is selected,
 * and hasNextPage alone is answered by fetching one row past the page.
 */
import {
  getDirectiveValues,
  GraphQLIncludeDirective,
  GraphQLSkipDirective,
  Kind,
  type FieldNode,
  type GraphQLResolveInfo,
  type SelectionSetNode,
} from 'graphql';
import type { Deps } from '../deps.ts';
import type { TraceSpan } from '../tracing.ts';
import type { Principal } from '../auth/principal.ts';
import type { TimeAxis } from '../db/tables.ts';
import { invalidArgument } from './errors.ts';
import { DATETIME_EXPECTED, UnreadableDateTime } from './scalars.ts';
import { MIN_MS } from '../datetime.ts';
import { parseFilterText } from '../facts/query/filters.ts';
import { planFactQuery, type FactQueryArgs, type PrefetchedModels } from '../facts/query/plan.ts';
import { countSql, pageSql, selectCount, selectPage } from '../facts/query/page.sql.ts';
import { sql } from 'kysely';
import type { Db } from '../db/connect.ts';
import { principalFromAccount } from '../auth/principal.ts';
import { authorize } from '../auth/access.ts';
import { loadAccountWith } from '../auth/auth.sql.ts';
import type { TokenClaims } from '../auth/tokens.ts';
import { loadModelsFingerprinted, modelMap, modelsFingerprint, modelsQuery } from '../facts/models.sql.ts';
import type { ModelCache, RememberedModels } from './model-cache.ts';
import type { FactQueryPlan, FactSqlRow } from '../facts/query/plan-types.ts';

export type { PrefetchedModels } from '../facts/query/plan.ts';

export interface GraphqlContext {
  deps: Deps;
  /** Set when the route re-checked the account before executing. */
  principal: Principal | undefined;
  /** The request's "now": the default end of a timeline window. */
  now: Date;
  /** Models looked up with the account re-check (surface.ts), or remembered, for the slugs the document names. */
  models: PrefetchedModels | undefined;
  /**
   * Set instead of `principal` when the route found the document's models remembered: the
   * token is verified, and the resolver re-checks the account in its own statement.
   */
  deferred?: DeferredCheck;
  /** The request's span, when tracing is on: resolvers open theirs under it. */
  span?: TraceSpan | undefined;
}

export interface DeferredCheck {
  claims: TokenClaims;
  remembered: RememberedModels;
  cache: ModelCache;
  /** The account was re-checked by an earlier statement of this request. */
  checked: boolean;
}

/** Remembers the document's models as they are now, and returns them for planning. */
function remember(d: DeferredCheck, models: PrefetchedModels['models'], fingerprint: string): PrefetchedModels {
  const prefetched = { slugs: new Set(d.remembered.slugs), models };
  d.cache.set({ ...d.remembered, prefetched, fingerprint });
  return prefetched;
}

/**
 * The account re-check with the document's models as they are now (one statement), as the
 * route does without remembered models; the models are remembered again.
 */
export async function recheck(db: Db, d: DeferredCheck): Promise<PrefetchedModels> {
  const { claims, remembered } = d;
  const { account, rows } = await loadAccountWith(db, claims.sub, { rows: modelsQuery(db, claims.ws, remembered.slugs) });
  authorize(principalFromAccount(claims, account), 'facts.query');
  d.checked = true;
  return remember(d, modelMap(rows[0]?.models ?? []), rows[0]?.fingerprint ?? '');
}

/** Plans that one statement answers: not as of an instant (those may walk, or pick a source first). */
const foldable = (plan: FactQueryPlan) => !(plan.mode === 'latest' && plan.until !== undefined);

export interface FactRow {
  id: string;
  dataModelId: string;
  entityId: string | null;
  observedAt: Date;
  insertedAt: Date;
  data: unknown;
}

export interface PageOfFact {
  hasNextPage?: boolean;
  hasPreviousPage: boolean;
  pageNumber: number;
  lastPage?: number;
  limit: number;
  count?: number;
  results?: FactRow[];
}

export const MAX_LIMIT = 250;
export const DEFAULT_LIMIT = 50;
/** GraphQL's Int: 32-bit signed. */
const INT_MAX = 2 ** 31 - 1;
const DAY_MS = 86_400_000;
export const DEFAULT_WINDOW_DAYS = 90;
export const MAX_WINDOW_DAYS = 366;

const MODES = ['latest', 'timeline'] as const;
const AXES = ['observed_at', 'inserted_at'] as const;
const SORTS = ['observed_at', 'inserted_at', 'entity_id'] as const;
const DIRECTIONS = ['asc', 'desc'] as const;
const JOIN_TYPES = ['left', 'inner'] as const;

function oneOf<T extends string>(value: unknown, allowed: readonly T[], def: T, argument: string): T {
  if (value === null || value === undefined) return def;
  if (typeof value === 'string' && (allowed as readonly string[]).includes(value)) return value as T;
  throw invalidArgument(`${argument} must be one of ${allowed.join(', ')}`, argument);
}

function dateTimeArg(value: unknown, argument: string): Date | undefined {
  if (value === null || value === undefined) return undefined;
  // Anything but a Date is unreadable: graphql-jit hands a literal the scalar refused
  // (an UnreadableDateTime) on as a plain copy of it, not as the instance.
  if (value instanceof UnreadableDateTime || !(value instanceof Date)) throw invalidArgument(`${argument} must be ${DATETIME_EXPECTED}`, argument);
  return value;
}

/** Explicit null means "the default", as if the argument were left out. */
function intArg(value: unknown, def: number): number {
  return typeof value === 'number' ? value : def;
}

/** Checks every argument that needs no database and returns the plan minus the models. */
export function checkArguments(args: Record<string, unknown>, now: Date): FactQueryArgs {
  const slug = args.dataModelSlug;
  if (typeof slug !== 'string') throw invalidArgument('dataModelSlug is required', 'dataModelSlug');
  const mode = oneOf(args.mode, MODES, 'latest', 'mode');
  const axis = oneOf<TimeAxis>(args.timeAxis, AXES, 'observed_at', 'timeAxis');
  const sort = oneOf(args.sort, SORTS, 'observed_at', 'sort');
  const direction = oneOf(args.sortDirection, DIRECTIONS, 'desc', 'sortDirection');
  const joinType = oneOf(args.joinType, JOIN_TYPES, 'left', 'joinType');
  const limit = intArg(args.limit, DEFAULT_LIMIT);
  const offset = intArg(args.offset, 0);
  if (limit < 1 || limit > MAX_LIMIT) throw invalidArgument(`limit must be between 1 and ${MAX_LIMIT}`, 'limit');
  if (offset < 0) throw invalidArgument('offset must not be negative', 'offset');
  // pageNumber is an Int too: only offset 2147483647 with limit 1 would overflow it.
  if (Math.floor(offset / limit) + 1 > INT_MAX) throw invalidArgument(`offset / limit + 1 (the pageNumber) must be at most ${INT_MAX}`, 'offset');
  if (mode === 'latest' && sort !== 'observed_at')
    throw invalidArgument('sort must be observed_at in latest mode (the latest rows are ordered by observedAt)', 'sort');

  let since = dateTimeArg(args.since, 'since');
  let until = dateTimeArg(args.until, 'until');
  // A window computed back from an instant near year 1 stops at year 1, the earliest instant a DateTime can name.
  const back = (from: Date, days: number) => new Date(Math.max(MIN_MS, from.getTime() - days * DAY_MS));
  if (mode === 'timeline') {
    until ??= now;
    since ??= back(until, DEFAULT_WINDOW_DAYS);
  }
  if (since !== undefined && until !== undefined && since.getTime() > until.getTime()) throw invalidArgument('since must not be after until', 'since');
  if (mode === 'timeline' && until!.getTime() - since!.getTime() > MAX_WINDOW_DAYS * DAY_MS) {
    since = back(until!, MAX_WINDOW_DAYS);
  }

  const joinSlug = typeof args.joinDataModelSlug === 'string' ? args.joinDataModelSlug : undefined;
  if (joinSlug !== undefined && mode !== 'latest') throw invalidArgument('joinDataModelSlug is allowed in latest mode only', 'joinDataModelSlug');
  const hasJoinFilters = args.joinFilters !== null && args.joinFilters !== undefined;
  if (hasJoinFilters && joinSlug === undefined) throw invalidArgument('joinFilters needs joinDataModelSlug', 'joinFilters');

  const filters = parseFilterText(args.filters as string | null | undefined, 'filters');
  const joinFilters = parseFilterText(args.joinFilters as string | null | undefined, 'joinFilters');
  return { slug, mode, axis, sort, direction, limit, offset, since, until, joinSlug, joinType, filters, joinFilters };
}

/**
 * Response names of the fields selected under the given selection sets, following
 * fragments and honouring @skip/@include, with their nodes (for looking one level deeper).
 */
export function selectedFields(
  sets: readonly (SelectionSetNode | undefined)[],
  info: Pick<GraphQLResolveInfo, 'fragments' | 'variableValues'>,
): Map<string, FieldNode[]> {
  const out = new Map<string, FieldNode[]>();
  const seen = new Set<string>();
  const included = (node: Parameters<typeof getDirectiveValues>[1]): boolean => {
    if (getDirectiveValues(GraphQLSkipDirective, node, info.variableValues)?.if === true) return false;
    return getDirectiveValues(GraphQLIncludeDirective, node, info.variableValues)?.if !== false;
  };
  const walk = (set: SelectionSetNode | undefined) => {
    if (!set) return;
    for (const sel of set.selections) {
      if (!included(sel)) continue;
      if (sel.kind === Kind.FIELD) {
        const list = out.get(sel.name.value) ?? [];
        list.push(sel);
        out.set(sel.name.value, list);
      } else if (sel.kind === Kind.INLINE_FRAGMENT) {
        walk(sel.selectionSet);
      } else if (!seen.has(sel.name.value)) {
        seen.add(sel.name.value);
        walk(info.fragments[sel.name.value]?.selectionSet);
      }
    }
  };
  for (const s of sets) walk(s);
  return out;
}

function toFact(plan: FactQueryPlan, row: FactSqlRow): FactRow {
  let data = row.data;
  if (plan.join && data !== undefined) {
    const joined = row.joined ?? null;
    // Every joined field is present, null when the joined fact lacks it or nothing matched.
    const member: Record<string, unknown> = {};
    for (const f of plan.join.model.fields) member[f.name] = joined !== null && Object.hasOwn(joined, f.name) ? joined[f.name] : null;
    data = { ...(data as Record<string, unknown>), [plan.join.model.slug]: member };
  }
  return { id: row.id, dataModelId: plan.model.id, entityId: row.entity_id, observedAt: row.observed_at, insertedAt: row.inserted_at, data };
}

/** What the selection asks of the page: the statements to run and how. */
interface Needs {
  results: FieldNode[] | undefined;
  withData: boolean;
  needCount: boolean;
  /** hasNextPage without a count: one row past the page answers it, with or without results. */
  probe: boolean;
  wantRows: boolean;
}

function needsOf(info: GraphQLResolveInfo): Needs {
  const selected = selectedFields(
    info.fieldNodes.map((n) => n.selectionSet),
    info,
  );
  const results = selected.get('results');
  const withData =
    results !== undefined &&
    selectedFields(
      results.map((n) => n.selectionSet),
      info,
    ).has('data');
  const needCount = selected.has('count') || selected.has('lastPage');
  const probe = selected.has('hasNextPage') && !needCount;
  return { results, withData, needCount, probe, wantRows: results !== undefined || probe };
}

/**
 * The arguments checked, then planned against the models known so far. A refusal is kept,
 * not thrown: when the account is still to be re-checked, its 401/403 come first.
 */
interface Planned {
  args?: FactQueryArgs;
  plan?: FactQueryPlan;
  error?: unknown;
}

async function planStep(db: Db, workspaceId: string, raw: Record<string, unknown>, now: Date, models: PrefetchedModels | undefined): Promise<Planned> {
  let args: FactQueryArgs;
  try {
    args = checkArguments(raw, now);
  } catch (error) {
    return { error };
  }
  try {
    return { args, plan: await planFactQuery(db, workspaceId, args, models) };
  } catch (error) {
    return { args, error };
  }
}

/** The plan to run, and the page and count when the account's statement already read them. */
interface Loaded {
  plan: FactQueryPlan;
  answered?: { rows: FactSqlRow[] | undefined; count: number | undefined };
}

/**
 * The account re-check, when the route left it to this resolver (its models were
 * remembered), in the statement that reads the page; then the plan is final.
 */
async function authorizeAndLoad(context: GraphqlContext, workspaceId: string, planned: Planned, needs: Needs): Promise<Loaded> {
  const { db } = context.deps;
  const deferred = context.deferred;
  if (deferred === undefined || deferred.checked) {
    if (planned.plan === undefined) throw planned.error;
    return { plan: planned.plan };
  }
  if (planned.plan === undefined) {
    // The account's 401/403 before any argument error, and the arguments against the
    // models as they are now rather than as remembered.
    const models = await recheck(db, deferred);
    if (planned.args === undefined) throw planned.error;
    return { plan: await planFactQuery(db, workspaceId, planned.args, models) };
  }
  const plan = planned.plan;
  // One statement: the account re-check, the models' fingerprint, the page and the count.
  // On PostgreSQL the count runs beside it on another connection instead (a count and a
  // page of a large model each take long; side by side they take the longer of the two),
  // and is used only once the account is accepted.
  const fold = foldable(plan);
  const countApart = fold && needs.needCount && context.deps.engine === 'postgres';
  const opts = { withData: needs.withData, extra: needs.probe ? 1 : 0 };
  const [found, apart] = await Promise.all([
    loadAccountWith(db, deferred.claims.sub, {
      values: {
        fingerprint: modelsFingerprint(workspaceId, deferred.remembered.slugs),
        ...(fold && needs.needCount && !countApart ? { count: sql`(${countSql(plan)})` } : {}),
      },
      ...(fold && needs.wantRows ? { rows: pageSql(plan, opts) } : {}),
    }),
    countApart ? selectCount(db, plan) : Promise.resolve(undefined),
  ]);
  authorize(principalFromAccount(deferred.claims, found.account), 'facts.query');
  deferred.checked = true;
  if (found.values.fingerprint !== deferred.remembered.fingerprint) {
    // The models changed since they were remembered: plan again with them as they are
    // (the account is checked; only the models are read again).
    const now = await loadModelsFingerprinted(db, workspaceId, [...deferred.remembered.slugs]);
    return { plan: await planFactQuery(db, workspaceId, planned.args!, remember(deferred, now.models, now.fingerprint)) };
  }
  if (!fold) return { plan };
  return {
    plan,
    answered: {
      rows: needs.wantRows ? (found.rows as FactSqlRow[]) : undefined,
      count: needs.needCount ? ((apart ?? found.values.count) as number) : undefined,
    },
  };
}

/**
 * factQuery in three steps, each done once: plan (arguments and models), authorize and
 * load (the account re-check, with the page when it can share its statement), execute
 * (the page and count statements the selection needs, unless already read) and shape.
 */
export async function resolveFactQuery(args: Record<string, unknown>, context: GraphqlContext, info: GraphQLResolveInfo): Promise<PageOfFact> {
  const { db } = context.deps;
  // The route authenticates before executing anything but health; this is the backstop.
  const workspaceId = context.principal?.workspaceId ?? context.deferred?.claims.ws;
  if (workspaceId === undefined) throw invalidArgument('factQuery requires a bearer token');
  const needs = needsOf(info);
  const planned = await planStep(db, workspaceId, args, context.now, context.models);
  const { plan, answered } = await authorizeAndLoad(context, workspaceId, planned, needs);

  const opts = { withData: needs.withData, extra: needs.probe ? 1 : 0 };
  const [rows, count] = answered
    ? [answered.rows, answered.count]
    : await Promise.all([
        needs.wantRows ? selectPage(db, plan, opts) : Promise.resolve(undefined),
        needs.needCount ? selectCount(db, plan) : Promise.resolve(undefined),
      ]);

  const page: PageOfFact = {
    hasPreviousPage: plan.offset > 0,
    pageNumber: Math.floor(plan.offset / plan.limit) + 1,
    limit: plan.limit,
  };
  if (count !== undefined) {
    page.count = count;
    page.lastPage = Math.max(1, Math.ceil(count / plan.limit));
    page.hasNextPage = plan.offset + plan.limit < count;
  } else if (needs.probe) {
    page.hasNextPage = rows!.length > plan.limit;
  }
  if (needs.results !== undefined) page.results = rows!.slice(0, plan.limit).map((r) => toFact(plan, r));
  return page;
}
