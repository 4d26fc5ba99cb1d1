/**
 * The charts' heavy half, imported only when a chart is drawn (its own chunk, like the
 * workflow editor's): uPlot for lines over time and bars over buckets or groups. The
 * numbers come drawn; chart.tsx keeps the text twin a screen reader reads.
 */
import uPlot from 'uplot';

export interface ChartSpec {
  kind: 'line' | 'bar';
  /** Instants in ms for a time axis, else category indices (with `categories` their labels). */
  x: number[];
  categories?: string[];
  series: Array<{ label: string; values: Array<number | null>; color: string }>;
  /** The value axis' label: the measure and its unit. */
  yLabel: string;
  xLabel: string;
}

export interface DrawnChart {
  resize(width: number, height: number): void;
  destroy(): void;
}

const axisStyle = { stroke: '#57606a', grid: { stroke: '#eaeef2', width: 1 }, ticks: { stroke: '#d0d7de', width: 1 } };

export function drawChart(host: HTMLElement, spec: ChartSpec, width: number, height: number): DrawnChart {
  const time = spec.categories === undefined;
  const bars = spec.kind === 'bar' ? uPlot.paths.bars!({ size: [0.6 / Math.max(1, spec.series.length), 64], gap: 2 }) : undefined;
  const opts: uPlot.Options = {
    width,
    height,
    // Seconds are uPlot's time unit.
    scales: {
      x: { time, ...(time ? {} : { range: (_u, min, max) => [min - 0.5, max + 0.5] }) },
      y: { range: (_u, min, max) => [Math.min(0, min), max > 0 ? max * 1.05 : 1] },
    },
    legend: { show: spec.series.length > 1 },
    cursor: { drag: { x: false, y: false } },
    axes: [
      {
        ...axisStyle,
        label: spec.xLabel,
        ...(time ? {} : { values: (_u: uPlot, ticks: number[]) => ticks.map((t) => (Number.isInteger(t) ? (spec.categories![t] ?? '') : '')), space: 20 }),
      },
      { ...axisStyle, label: spec.yLabel, size: 60 },
    ],
    series: [
      {},
      ...spec.series.map((s) => ({
        label: s.label,
        stroke: s.color,
        width: 2,
        ...(bars ? { paths: bars, fill: s.color, points: { show: false } } : { points: { show: spec.x.length <= 60 } }),
        spanGaps: false,
      })),
    ],
  };
  const data: uPlot.AlignedData = [time ? spec.x.map((t) => t / 1000) : spec.x, ...spec.series.map((s) => s.values)];
  const plot = new uPlot(opts, data, host);
  return {
    resize: (w, h) => plot.setSize({ width: w, height: h }),
    destroy: () => plot.destroy(),
  };
}
