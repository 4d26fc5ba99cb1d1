/**
 * What a dashboard widget is, with nothing to import: the kinds, the grid, the config's
 * type and the two readings of it both the server (config.ts, which checks a config) and
 * the console (which sends it as factAggregate's arguments) make.
 */
/** factAggregate's arguments a config passes on as they are (filters as JSON text), in factAggregate's order. */
export const CONFIG_ARGUMENTS = [
  'mode',
  'timeAxis',
  'filters',
  'joinDataModelSlug',
  'joinType',
  'joinFilters',
  'groupBy',
  'bucket',
  'timezone',
  'weekStart',
  'series',
  'measures',
  'orderBy',
  'limit',
] as const;

export const WIDGET_KINDS = ['number', 'line', 'bar', 'table'] as const;
export type WidgetKind = (typeof WIDGET_KINDS)[number];

/** The console's grid: 12 columns, rows of a fixed height, as many as needed. */
export const GRID_COLUMNS = 12;
export const MAX_GRID_ROW = 1000;
export const MAX_WIDGET_HEIGHT = 24;

export interface WidgetPosition {
  x: number;
  y: number;
  w: number;
  h: number;
}

export const DEFAULT_POSITION: WidgetPosition = { x: 0, y: 0, w: 4, h: 3 };

export const MEASURE_OPS = ['count', 'count_distinct_entities', 'sum', 'avg', 'min', 'max'] as const;
export const BUCKETS = ['minute', 'hour', 'day', 'week', 'month'] as const;
export const MAX_MEASURES = 10;
export const MAX_GROUP_BY = 3;
export const MAX_ORDER_BY = 4;
export const MAX_COLORS = 12;
export const MAX_SERIES_BUCKETS = 1000;
/** The longest window: the timeline's clamp (366 days), as factQuery's. */
export const MAX_WINDOW_MS = 366 * 86_400_000;

export interface WidgetMeasure {
  op: (typeof MEASURE_OPS)[number];
  field?: string;
  as?: string;
}

export interface WidgetConfig {
  mode?: 'latest' | 'timeline';
  timeAxis?: 'observed_at' | 'inserted_at';
  /** ISO 8601 duration ending now: P90D, P12W, PT24H, PT30M. */
  window?: string;
  filters?: Array<{ field: string; op: string; value: unknown }>;
  joinDataModelSlug?: string;
  joinType?: 'left' | 'inner';
  joinFilters?: Array<{ field: string; op: string; value: unknown }>;
  groupBy?: string[];
  bucket?: (typeof BUCKETS)[number];
  timezone?: string;
  weekStart?: 'monday' | 'sunday';
  series?: boolean;
  measures?: WidgetMeasure[];
  orderBy?: Array<{ by: string; direction?: 'asc' | 'desc' }>;
  limit?: number;
  /** The measure drawn (number, line, bar): its name; the first measure when absent. */
  measure?: string;
  /** A unit for the value axis and the number, e.g. "EUR" or "orders". */
  unit?: string;
  /** Series colours in order, as #rgb or #rrggbb. */
  colors?: string[];
}

export const WINDOW_RE = /^P(?:(\d{1,4})D|(\d{1,3})W|T(\d{1,5})H|T(\d{1,6})M)$/;

/** A window's length in ms, or undefined when it is not one of the durations a widget takes. */
export function windowMs(window: string): number | undefined {
  const m = WINDOW_RE.exec(window);
  if (!m) return undefined;
  const [, d, w, h, min] = m;
  if (d !== undefined) return Number(d) * 86_400_000;
  if (w !== undefined) return Number(w) * 7 * 86_400_000;
  if (h !== undefined) return Number(h) * 3_600_000;
  return Number(min) * 60_000;
}

/** The name factAggregate gives a measure: `as`, else the op, or op_field. */
export function measureName(m: WidgetMeasure): string {
  return m.as ?? (m.field === undefined ? m.op : `${m.op}_${m.field}`);
}
