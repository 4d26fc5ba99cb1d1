/**
 * A dashboard widget's kind, position and config, and the one check of them that the
 * JSON:API writes and the admin API (`tributary widget create`) both run, so the two accept
 * exactly the same widgets (docs/console.md, "Dashboards"). The config is factAggregate's
 * arguments (docs/graphql.md) besides the slug, under the same names, with a relative
 * `window` instead of fixed since/until so a widget keeps showing the recent past; only its
 * shape is checked here: the fields it names are the data model's to answer for when the
 * widget is read, as factAggregate names the argument.
 */
import { invalidAt } from '../../errors.ts';
import { isObject, pointerToken } from '../../json.ts';
import { FILTER_OPS, MAX_CLAUSES } from '../../facts/query/filters.ts';
import {
  BUCKETS,
  CONFIG_ARGUMENTS,
  DEFAULT_POSITION,
  GRID_COLUMNS,
  MAX_COLORS,
  MAX_GRID_ROW,
  MAX_GROUP_BY,
  MAX_MEASURES,
  MAX_ORDER_BY,
  MAX_SERIES_BUCKETS,
  MAX_WINDOW_MS,
  MAX_WIDGET_HEIGHT,
  measureName,
  MEASURE_OPS,
  WIDGET_KINDS,
  WINDOW_RE,
  windowMs,
  type WidgetConfig,
  type WidgetKind,
  type WidgetMeasure,
  type WidgetPosition,
} from './widget-config.ts';

export { BUCKETS, DEFAULT_POSITION, GRID_COLUMNS, MAX_GRID_ROW, MAX_WIDGET_HEIGHT, measureName, MEASURE_OPS, WIDGET_KINDS, windowMs };
export type { WidgetConfig, WidgetKind, WidgetMeasure, WidgetPosition };

const BUCKET_MS: Record<string, number> = { minute: 60_000, hour: 3_600_000, day: 86_400_000, week: 7 * 86_400_000, month: 28 * 86_400_000 };

/** A position on the 12-column grid; absent is the default placement. */
export function checkPosition(v: unknown, at: string): WidgetPosition {
  if (v === undefined || v === null) return { ...DEFAULT_POSITION };
  if (!isObject(v)) throw invalidAt(at, 'position must be an object {x, y, w, h} of whole numbers');
  for (const k of Object.keys(v))
    if (!['x', 'y', 'w', 'h'].includes(k)) throw invalidAt(`${at}/${pointerToken(k)}`, `${k} is not a member of a position (x, y, w, h)`);
  const whole = (k: 'x' | 'y' | 'w' | 'h', min: number, max: number): number => {
    const n = v[k];
    if (typeof n !== 'number' || !Number.isInteger(n) || n < min || n > max) throw invalidAt(`${at}/${k}`, `${k} must be a whole number from ${min} to ${max}`);
    return n;
  };
  const p = { x: whole('x', 0, GRID_COLUMNS - 1), y: whole('y', 0, MAX_GRID_ROW), w: whole('w', 1, GRID_COLUMNS), h: whole('h', 1, MAX_WIDGET_HEIGHT) };
  if (p.x + p.w > GRID_COLUMNS) throw invalidAt(`${at}/w`, `x + w must be at most ${GRID_COLUMNS}: the grid has ${GRID_COLUMNS} columns (x ${p.x}, w ${p.w})`);
  return p;
}

export function checkKind(v: unknown, at: string): WidgetKind {
  if (typeof v !== 'string' || !(WIDGET_KINDS as readonly string[]).includes(v)) throw invalidAt(at, `kind must be one of ${WIDGET_KINDS.join(', ')}`);
  return v as WidgetKind;
}

const NAME_RE = /^[a-z][a-z0-9_]{0,62}$/;
/** A groupBy path: a field, or `<joinSlug>.<field>`. */
const PATH_RE = /^(?:[a-z0-9-]{1,63}\.)?[A-Za-z_][A-Za-z0-9_]{0,62}$/;
const FIELD_RE = /^[A-Za-z_][A-Za-z0-9_]{0,62}$|^[a-z0-9-]{1,63}\.[A-Za-z_][A-Za-z0-9_]{0,62}$/;
const COLOR_RE = /^#(?:[0-9a-fA-F]{3}|[0-9a-fA-F]{6})$/;

function validTimezone(tz: string): boolean {
  try {
    new Intl.DateTimeFormat('en', { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}

/** What a config holds: factAggregate's arguments, and what the console draws with. */
const CONFIG_MEMBERS = [...CONFIG_ARGUMENTS, 'window', 'measure', 'unit', 'colors'] as const;

function only(v: Record<string, unknown>, members: readonly string[], at: string, what: string): void {
  for (const k of Object.keys(v))
    if (!members.includes(k)) throw invalidAt(`${at}/${pointerToken(k)}`, `${k} is not a member of ${what} (${members.join(', ')})`);
}

function oneOf<const T extends string>(v: unknown, values: readonly T[], at: string, name: string): T {
  if (typeof v !== 'string' || !(values as readonly string[]).includes(v)) throw invalidAt(at, `${name} must be one of ${values.join(', ')}`);
  return v as T;
}

function text(v: unknown, at: string, name: string, re: RegExp, rule: string): string {
  if (typeof v !== 'string' || !re.test(v)) throw invalidAt(at, `${name} ${rule}`);
  return v;
}

function clauses(v: unknown, at: string, name: string): Array<{ field: string; op: string; value: unknown }> {
  if (!Array.isArray(v)) throw invalidAt(at, `${name} must be an array of {field, op, value}, as factQuery's filters`);
  if (v.length > MAX_CLAUSES) throw invalidAt(at, `${name} has ${v.length} clauses; at most ${MAX_CLAUSES} are allowed`);
  if (JSON.stringify(v).length > 65_536) throw invalidAt(at, `${name} is longer than 65536 characters as JSON`);
  return v.map((c: unknown, i) => {
    const ca = `${at}/${i}`;
    if (!isObject(c)) throw invalidAt(ca, 'a clause must be an object {field, op, value}');
    only(c, ['field', 'op', 'value'], ca, 'a clause');
    const field = text(c.field, `${ca}/field`, 'field', FIELD_RE, 'must be a field name');
    const op = oneOf(c.op, FILTER_OPS, `${ca}/op`, 'op');
    if (!Object.hasOwn(c, 'value')) throw invalidAt(`${ca}/value`, 'value is missing');
    return { field, op, value: c.value };
  });
}

/**
 * The config of a widget of `kind`, checked; `at` is the pointer of the config itself
 * (`/data/attributes/config` or the admin API's `/config`). Absent is `{}`: a count of
 * the model's current entities.
 */
export function checkConfig(v: unknown, kind: WidgetKind, at: string): WidgetConfig {
  if (v === undefined || v === null) v = {};
  if (!isObject(v)) throw invalidAt(at, 'config must be an object (docs/console.md, "Dashboards")');
  only(v, CONFIG_MEMBERS, at, 'a widget config');
  const c: WidgetConfig = {};
  const has = (k: string) => v[k] !== undefined;
  if (has('mode')) c.mode = oneOf(v.mode, ['latest', 'timeline'], `${at}/mode`, 'mode');
  if (has('timeAxis')) c.timeAxis = oneOf(v.timeAxis, ['observed_at', 'inserted_at'], `${at}/timeAxis`, 'timeAxis');
  let span: number | undefined;
  if (has('window')) {
    span = typeof v.window === 'string' ? windowMs(v.window) : undefined;
    if (span === undefined || span <= 0 || span > MAX_WINDOW_MS)
      throw invalidAt(`${at}/window`, 'window must be an ISO 8601 duration of days, weeks, hours or minutes up to 366 days, e.g. P90D, P12W, PT24H or PT30M');
    c.window = v.window as string;
  }
  if (has('filters')) c.filters = clauses(v.filters, `${at}/filters`, 'filters');
  const mode = c.mode ?? 'latest';
  for (const k of ['joinDataModelSlug', 'joinType', 'joinFilters'] as const) {
    if (has(k) && mode !== 'latest') throw invalidAt(`${at}/${k}`, `${k} applies in latest mode only, as in factQuery`);
  }
  if (has('joinDataModelSlug'))
    c.joinDataModelSlug = text(v.joinDataModelSlug, `${at}/joinDataModelSlug`, 'joinDataModelSlug', /^[a-z0-9-]{1,63}$/, 'must be a data model slug');
  if (has('joinType')) c.joinType = oneOf(v.joinType, ['left', 'inner'], `${at}/joinType`, 'joinType');
  if (has('joinFilters')) c.joinFilters = clauses(v.joinFilters, `${at}/joinFilters`, 'joinFilters');
  if ((has('joinType') || has('joinFilters')) && !has('joinDataModelSlug'))
    throw invalidAt(`${at}/${has('joinType') ? 'joinType' : 'joinFilters'}`, 'joinType and joinFilters need joinDataModelSlug');
  if (has('groupBy')) {
    if (!Array.isArray(v.groupBy) || v.groupBy.length > MAX_GROUP_BY)
      throw invalidAt(`${at}/groupBy`, `groupBy must be an array of at most ${MAX_GROUP_BY} field paths`);
    c.groupBy = v.groupBy.map((p: unknown, i) => text(p, `${at}/groupBy/${i}`, 'a groupBy path', PATH_RE, 'must be a field name or <joinSlug>.<field>'));
    if (new Set(c.groupBy).size !== c.groupBy.length) throw invalidAt(`${at}/groupBy`, 'groupBy names a path twice');
  }
  if (has('bucket')) c.bucket = oneOf(v.bucket, BUCKETS, `${at}/bucket`, 'bucket');
  if (has('timezone')) {
    if (typeof v.timezone !== 'string' || v.timezone.length > 64 || !validTimezone(v.timezone))
      throw invalidAt(`${at}/timezone`, 'timezone must be an IANA time zone name, e.g. Europe/Paris');
    c.timezone = v.timezone;
  }
  if (has('weekStart')) c.weekStart = oneOf(v.weekStart, ['monday', 'sunday'], `${at}/weekStart`, 'weekStart');
  if (has('series')) {
    if (typeof v.series !== 'boolean') throw invalidAt(`${at}/series`, 'series must be true or false');
    c.series = v.series;
  }
  if (c.series) {
    if (mode !== 'latest') throw invalidAt(`${at}/series`, 'series applies in latest mode only: the latest state as of each bucket end');
    if (!c.bucket) throw invalidAt(`${at}/bucket`, 'series needs a bucket');
    if (span === undefined) throw invalidAt(`${at}/window`, 'series needs a window, e.g. P90D');
    const buckets = Math.ceil(span / BUCKET_MS[c.bucket]!);
    if (buckets > MAX_SERIES_BUCKETS)
      throw invalidAt(`${at}/bucket`, `a ${c.window} window has about ${buckets} ${c.bucket} buckets; a series takes at most ${MAX_SERIES_BUCKETS}`);
  }
  if (has('measures')) {
    if (!Array.isArray(v.measures) || v.measures.length === 0 || v.measures.length > MAX_MEASURES)
      throw invalidAt(`${at}/measures`, `measures must be an array of 1 to ${MAX_MEASURES} {op, field?, as?}`);
    c.measures = v.measures.map((m: unknown, i) => {
      const ma = `${at}/measures/${i}`;
      if (!isObject(m)) throw invalidAt(ma, 'a measure must be an object {op, field?, as?}');
      only(m, ['op', 'field', 'as'], ma, 'a measure');
      const out: WidgetMeasure = { op: oneOf(m.op, MEASURE_OPS, `${ma}/op`, 'op') };
      const fielded = out.op !== 'count' && out.op !== 'count_distinct_entities';
      if (m.field !== undefined) {
        if (!fielded) throw invalidAt(`${ma}/field`, `${out.op} takes no field`);
        out.field = text(m.field, `${ma}/field`, 'field', FIELD_RE, 'must be a field name or <joinSlug>.<field>');
      } else if (fielded) throw invalidAt(`${ma}/field`, `${out.op} needs a field (an integer or float field)`);
      if (m.as !== undefined)
        out.as = text(m.as, `${ma}/as`, 'as', NAME_RE, 'must start with a lowercase letter and hold only lowercase letters, digits and underscores');
      return out;
    });
    const names = c.measures.map(measureName);
    const twice = names.find((n, i) => names.indexOf(n) !== i);
    if (twice !== undefined) throw invalidAt(`${at}/measures`, `two measures are named ${twice}: give one an "as"`);
  }
  const names = (c.measures ?? [{ op: 'count' as const }]).map(measureName);
  if (has('orderBy')) {
    if (!Array.isArray(v.orderBy) || v.orderBy.length > MAX_ORDER_BY)
      throw invalidAt(`${at}/orderBy`, `orderBy must be an array of at most ${MAX_ORDER_BY} {by, direction?}`);
    const orderable = [...names, ...(c.groupBy ?? []), ...(c.bucket ? ['bucket'] : [])];
    c.orderBy = v.orderBy.map((o: unknown, i) => {
      const oa = `${at}/orderBy/${i}`;
      if (!isObject(o)) throw invalidAt(oa, 'an order must be an object {by, direction?}');
      only(o, ['by', 'direction'], oa, 'an order');
      const by = oneOf(o.by, orderable, `${oa}/by`, 'by');
      return o.direction === undefined ? { by } : { by, direction: oneOf(o.direction, ['asc', 'desc'], `${oa}/direction`, 'direction') };
    });
  }
  if (has('limit')) {
    if (typeof v.limit !== 'number' || !Number.isInteger(v.limit) || v.limit < 1 || v.limit > 10_000)
      throw invalidAt(`${at}/limit`, 'limit must be a whole number from 1 to 10000');
    c.limit = v.limit;
  }
  if (has('measure')) c.measure = oneOf(v.measure, names, `${at}/measure`, 'measure');
  if (has('unit')) c.unit = text(v.unit, `${at}/unit`, 'unit', /^\P{Cc}{1,20}$/u, 'must be 1 to 20 characters of text');
  if (has('colors')) {
    if (!Array.isArray(v.colors) || v.colors.length > MAX_COLORS)
      throw invalidAt(`${at}/colors`, `colors must be an array of at most ${MAX_COLORS} hex colours`);
    c.colors = v.colors.map((col: unknown, i) => text(col, `${at}/colors/${i}`, 'a colour', COLOR_RE, 'must be a hex colour, #rgb or #rrggbb'));
  }
  // What each kind draws: one value, a line over time, bars over groups or buckets.
  if (kind === 'number' && (c.groupBy?.length || c.bucket))
    throw invalidAt(`${at}/${c.groupBy?.length ? 'groupBy' : 'bucket'}`, 'a number widget shows one value: it takes no groupBy and no bucket');
  if (kind === 'line' && !c.bucket) throw invalidAt(`${at}/bucket`, 'a line widget draws a measure over time: it needs a bucket');
  if (kind === 'bar' && !c.bucket && !c.groupBy?.length)
    throw invalidAt(`${at}/groupBy`, 'a bar widget draws a bar per group or per bucket: it needs a groupBy or a bucket');
  return c;
}

/** The whole widget's kind, position and config, as a write leaves them (`current`: the stored widget, for a PATCH). */
export function checkWidget(
  input: { kind?: unknown; position?: unknown; config?: unknown },
  current: { kind: string; position: unknown; config: unknown } | undefined,
  pointerOf: (name: 'kind' | 'position' | 'config') => string,
): { kind: WidgetKind; position: WidgetPosition; config: WidgetConfig } {
  const given = <K extends 'kind' | 'position' | 'config'>(k: K) => (input[k] !== undefined ? input[k] : current?.[k]);
  const kind = checkKind(given('kind'), pointerOf('kind'));
  const position = checkPosition(given('position'), pointerOf('position'));
  // A kind changed without a config is checked against the stored config: the pointer is still the config's.
  const config = checkConfig(given('config'), kind, pointerOf('config'));
  return { kind, position, config };
}

const clauseSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['field', 'op', 'value'],
  properties: { field: { type: 'string' }, op: { type: 'string', enum: [...FILTER_OPS] }, value: {} },
};

/** The OpenAPI document's schema of a position: what checkPosition accepts, but for x + w <= 12. */
export const POSITION_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['x', 'y', 'w', 'h'],
  description: `A place on the ${GRID_COLUMNS}-column grid; x + w is at most ${GRID_COLUMNS}`,
  properties: {
    x: { type: 'integer', minimum: 0, maximum: GRID_COLUMNS - 1 },
    y: { type: 'integer', minimum: 0, maximum: MAX_GRID_ROW },
    w: { type: 'integer', minimum: 1, maximum: GRID_COLUMNS },
    h: { type: 'integer', minimum: 1, maximum: MAX_WIDGET_HEIGHT },
  },
} as const;

/** The OpenAPI document's schema of a config: its members as checkConfig takes them (the rules across members are in docs/console.md). */
export const CONFIG_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  description: 'factAggregate\'s arguments besides the slug, with a relative window (docs/console.md, "Dashboards")',
  properties: {
    mode: { type: 'string', enum: ['latest', 'timeline'] },
    timeAxis: { type: 'string', enum: ['observed_at', 'inserted_at'] },
    window: { type: 'string', pattern: WINDOW_RE.source, examples: ['P90D', 'PT24H'] },
    filters: { type: 'array', maxItems: MAX_CLAUSES, items: clauseSchema },
    joinDataModelSlug: { type: 'string', pattern: '^[a-z0-9-]{1,63}$' },
    joinType: { type: 'string', enum: ['left', 'inner'] },
    joinFilters: { type: 'array', maxItems: MAX_CLAUSES, items: clauseSchema },
    groupBy: { type: 'array', maxItems: MAX_GROUP_BY, items: { type: 'string', pattern: PATH_RE.source } },
    bucket: { type: 'string', enum: [...BUCKETS] },
    timezone: { type: 'string', maxLength: 64 },
    weekStart: { type: 'string', enum: ['monday', 'sunday'] },
    series: { type: 'boolean' },
    measures: {
      type: 'array',
      minItems: 1,
      maxItems: MAX_MEASURES,
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['op'],
        properties: { op: { type: 'string', enum: [...MEASURE_OPS] }, field: { type: 'string' }, as: { type: 'string', pattern: NAME_RE.source } },
      },
    },
    orderBy: {
      type: 'array',
      maxItems: MAX_ORDER_BY,
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['by'],
        properties: { by: { type: 'string' }, direction: { type: 'string', enum: ['asc', 'desc'] } },
      },
    },
    limit: { type: 'integer', minimum: 1, maximum: 10_000 },
    measure: { type: 'string' },
    unit: { type: 'string', maxLength: 20 },
    colors: { type: 'array', maxItems: MAX_COLORS, items: { type: 'string', pattern: COLOR_RE.source } },
  },
} as const;
