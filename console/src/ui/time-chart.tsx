/**
 * A line chart of values over time, drawn by hand in SVG (no chart library: the bundle stays
 * small). Every point is a <circle> with a <title> a screen reader and a hover both read; the
 * SVG says what it shows in its aria-label. Colours come from --series-N in styles.css.
 */

export interface SeriesPoint {
  /** Milliseconds since the epoch. */
  t: number;
  v: number;
}

export interface Series {
  name: string;
  points: SeriesPoint[];
}

const W = 760;

/** The i-th series' colour, one of --series-0..5 in styles.css (set from code: the CSP allows no style attribute text). */
const seriesColour = (i: number) => ({ '--c': `var(--series-${i % 6})` });

const H = 300;
const M = { top: 16, right: 20, bottom: 48, left: 64 };

export const formatTime = (ms: number) => new Date(ms).toLocaleString(undefined, { dateStyle: 'short', timeStyle: 'medium' });

/** A round step (1, 2 or 5 times a power of ten) that cuts [lo, hi] into about `count` parts. */
function niceStep(lo: number, hi: number, count: number): number {
  const raw = (hi - lo) / count;
  const mag = 10 ** Math.floor(Math.log10(raw));
  return [1, 2, 5, 10].map((k) => k * mag).find((s) => s >= raw) ?? raw;
}

function extent(values: number[], pad: number): [number, number] {
  let lo = Math.min(...values);
  let hi = Math.max(...values);
  if (lo === hi) {
    lo -= pad;
    hi += pad;
  }
  return [lo, hi];
}

/** A tick's label: the date alone when the chart spans days, else the date and the minute. */
function tickLabel(ms: number, spanMs: number): string {
  return spanMs >= 2 * 86_400_000
    ? new Date(ms).toLocaleDateString(undefined, { dateStyle: 'short' })
    : new Date(ms).toLocaleString(undefined, { dateStyle: 'short', timeStyle: 'short' });
}

const shortNumber = (v: number) => (Math.abs(v) >= 1e6 || (Math.abs(v) < 1e-3 && v !== 0) ? v.toExponential(2) : String(Number(v.toPrecision(6))));

export function TimeChart(props: { series: Series[]; label: string; xLabel?: string; yLabel?: string }) {
  const all = props.series.flatMap((s) => s.points);
  if (all.length === 0) return <p class="muted">No numeric values to draw.</p>;
  const [t0, t1] = extent(
    all.map((p) => p.t),
    3_600_000,
  );
  const [vLo, vHi] = extent(
    all.map((p) => p.v),
    Math.abs(all[0]!.v) || 1,
  );
  // The y axis runs between round values around the data, with a tick at each step.
  const step = niceStep(vLo, vHi, 5);
  const y0 = Math.floor(vLo / step) * step;
  const y1 = Math.ceil(vHi / step) * step;
  const yTicks = Array.from({ length: Math.round((y1 - y0) / step) + 1 }, (_, i) => Number((y0 + i * step).toPrecision(12)));
  const x = (t: number) => M.left + ((t - t0) / (t1 - t0)) * (W - M.left - M.right);
  const y = (v: number) => H - M.bottom - ((v - y0) / (y1 - y0)) * (H - M.top - M.bottom);
  const xTicks = Array.from({ length: 5 }, (_, i) => t0 + ((t1 - t0) * i) / 4);
  return (
    <svg class="time-chart" viewBox={`0 0 ${W} ${H}`} role="img" aria-label={props.label} data-testid="time-chart">
      <g class="grid" aria-hidden="true">
        {yTicks.map((v) => (
          <line x1={M.left} x2={W - M.right} y1={y(v)} y2={y(v)} />
        ))}
      </g>
      <g class="axis" aria-hidden="true">
        <line x1={M.left} x2={M.left} y1={M.top} y2={H - M.bottom} />
        <line x1={M.left} x2={W - M.right} y1={H - M.bottom} y2={H - M.bottom} />
        {yTicks.map((v) => (
          <text x={M.left - 6} y={y(v)} text-anchor="end" dominant-baseline="middle">
            {shortNumber(v)}
          </text>
        ))}
        {xTicks.map((t, i) => (
          <text x={x(t)} y={H - M.bottom + 16} text-anchor={i === 0 ? 'start' : i === 4 ? 'end' : 'middle'}>
            {tickLabel(t, t1 - t0)}
          </text>
        ))}
        <text x={(M.left + W - M.right) / 2} y={H - 8} text-anchor="middle" class="axis-label">
          {props.xLabel ?? 'time'}
        </text>
        <text x={14} y={(M.top + H - M.bottom) / 2} text-anchor="middle" class="axis-label" transform={`rotate(-90 14 ${(M.top + H - M.bottom) / 2})`}>
          {props.yLabel ?? 'value'}
        </text>
      </g>
      {props.series.map((s, i) => {
        const pts = [...s.points].sort((a, b) => a.t - b.t);
        return (
          <g class="series" key={s.name} style={seriesColour(i)}>
            <polyline points={pts.map((p) => `${x(p.t)},${y(p.v)}`).join(' ')} />
            {pts.map((p) => (
              <circle cx={x(p.t)} cy={y(p.v)} r={4} data-testid="fact-point">
                <title>{`${s.name} ${p.v} at ${formatTime(p.t)}`}</title>
              </circle>
            ))}
          </g>
        );
      })}
    </svg>
  );
}

/** The legend: the series' names in their colours (the colour is never the only cue: the names are words). */
export function ChartLegend(props: { names: string[] }) {
  return (
    <ul class="chart-legend" aria-label="Legend">
      {props.names.map((n, i) => (
        <li>
          <span class="swatch" aria-hidden="true" style={seriesColour(i)} />
          {n}
        </li>
      ))}
    </ul>
  );
}
