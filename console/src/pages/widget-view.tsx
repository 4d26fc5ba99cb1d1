/**
 * What a factAggregate answer looks like as each widget kind: one number, a line over the
 * buckets, bars per group or bucket (both through ui/chart.tsx, with their text twin), or a
 * table of every group. The Dashboards page and the Facts page's group-by view draw with it.
 */
import { useMemo } from 'preact/hooks';
import { Chart, DEFAULT_COLORS, type ChartSpec } from '../ui/chart.tsx';
import { Empty } from '../ui/index.tsx';
import { formatNumber, groupLabel, keyText, measureName, valueOf, type AggregateAnswer, type WidgetConfig } from './aggregate-query.ts';

export type Kind = 'number' | 'line' | 'bar' | 'table';

/** The measure a widget draws: the config's `measure`, else the first. */
export function shownMeasure(config: WidgetConfig, answer: AggregateAnswer): string {
  return config.measure ?? answer.measures[0] ?? 'count';
}

/** Counts are 0 where a bucket has no facts; a sum or an average there is unknown. */
function absentValue(config: WidgetConfig, name: string): number | null {
  const m = (config.measures ?? [{ op: 'count' as const }]).find((x) => measureName(x) === name);
  return m === undefined || m.op === 'count' || m.op === 'count_distinct_entities' ? 0 : null;
}

const MAX_SERIES = 12;

const bucketText = (ms: number, bucket: string | undefined, tz: string | undefined) =>
  new Date(ms).toLocaleString('en-GB', {
    timeZone: tz ?? 'UTC',
    dateStyle: 'medium',
    ...(bucket === 'minute' || bucket === 'hour' ? { timeStyle: 'short' } : {}),
  });

/** The chart of an answer: x the buckets (a time axis) or the groups (categories); a series per group when both. */
export function chartSpec(kind: 'line' | 'bar', config: WidgetConfig, answer: AggregateAnswer): ChartSpec {
  const name = shownMeasure(config, answer);
  const colors = config.colors?.length ? config.colors : DEFAULT_COLORS;
  const yLabel = config.unit ? `${name} (${config.unit})` : name;
  if (config.bucket) {
    const x = [...new Set(answer.groups.flatMap((g) => (g.bucket ? [Date.parse(g.bucket)] : [])))].sort((a, b) => a - b);
    const at = new Map(x.map((t, i) => [t, i]));
    const labels = [...new Set(answer.groups.map(groupLabel))].slice(0, MAX_SERIES);
    const series = labels.map((label, i) => {
      const values: Array<number | null> = x.map(() => absentValue(config, name));
      for (const g of answer.groups) if (groupLabel(g) === label && g.bucket) values[at.get(Date.parse(g.bucket))!] = valueOf(g, name);
      return { label: label === 'all' ? name : label, values, color: colors[i % colors.length]! };
    });
    return { kind, x, series, yLabel, xLabel: `bucket (${config.bucket}, ${config.timezone ?? 'UTC'})` };
  }
  const groups = answer.groups;
  return {
    kind,
    x: groups.map((_, i) => i),
    categories: groups.map(groupLabel),
    series: [{ label: name, values: groups.map((g) => valueOf(g, name)), color: colors[0]! }],
    yLabel,
    xLabel: (config.groupBy ?? []).join(' · ') || 'group',
  };
}

export function AggregateBody(props: { kind: Kind; config: WidgetConfig; answer: AggregateAnswer; title: string; height: number }) {
  const { kind, config, answer } = props;
  const name = shownMeasure(config, answer);
  // The same answer keeps the same spec: the chart is drawn again only when its numbers change, not when the page around it does.
  const spec = useMemo(() => (kind === 'line' || kind === 'bar' ? chartSpec(kind, config, answer) : undefined), [kind, config, answer]);
  if (kind === 'number') {
    const g = answer.groups[0];
    const value = g ? valueOf(g, name) : absentValue(config, name);
    return (
      <p class="widget-number" data-testid="widget-number">
        <span class="widget-number-value">{formatNumber(value)}</span> {config.unit && <span class="muted">{config.unit}</span>}
        <span class="visually-hidden"> ({name})</span>
      </p>
    );
  }
  if (answer.groups.length === 0) return <Empty>No facts match.</Empty>;
  const cut = answer.groupsCut && <p class="muted small">More groups matched than the limit ({config.limit ?? 1000}); the first are shown.</p>;
  if (spec) {
    const xText = (x: number, i: number) => (spec.categories ? (spec.categories[i] ?? '') : bucketText(x, config.bucket, config.timezone));
    const label = `${props.title}: ${name}${config.unit ? ` in ${config.unit}` : ''} by ${spec.xLabel}, ${spec.x.length} points`;
    return (
      <>
        <Chart spec={spec} label={label} height={props.height} xText={xText} yText={(v) => formatNumber(v, config.unit)} />
        {cut}
      </>
    );
  }
  return (
    <>
      <div class="table-wrap">
        <table data-testid="aggregate-table">
          <caption class="visually-hidden">{props.title}</caption>
          <thead>
            <tr>
              {answer.groupBy.map((p) => (
                <th scope="col">{p}</th>
              ))}
              {config.bucket && <th scope="col">bucket</th>}
              {answer.measures.map((m) => (
                <th scope="col" class="num">
                  {m}
                </th>
              ))}
            </tr>
          </thead>
          <tbody>
            {answer.groups.map((g) => (
              <tr>
                {g.keys.map((k) => (
                  <td>{keyText(k)}</td>
                ))}
                {config.bucket && <td>{g.bucket ? bucketText(Date.parse(g.bucket), config.bucket, config.timezone) : '—'}</td>}
                {answer.measures.map((m) => (
                  <td class="num">{formatNumber(valueOf(g, m))}</td>
                ))}
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {cut}
    </>
  );
}
