/**
 * A line or bar chart drawn by uPlot, loaded the first time a chart shows (ui/uplot-chart.ts,
 * its own chunk: the initial JavaScript stays in its budget), and its text twin: a table of
 * the same numbers, hidden from sight and read by screen readers, as the canvas says nothing.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import type { ChartSpec, DrawnChart } from './uplot-chart.ts';

export type { ChartSpec };

type Uplot = typeof import('./uplot-chart.ts');
let uplotModule: Promise<Uplot> | undefined;
const loadUplot = () => (uplotModule ??= import('./uplot-chart.ts'));

/** The console's series colours (WCAG AA on white), used when a config names none. */
export const DEFAULT_COLORS = ['#0b5cad', '#b35900', '#116329', '#8250df', '#a40e26', '#1b7c83'];

export function Chart(props: { spec: ChartSpec; label: string; height: number; xText: (x: number, i: number) => string; yText: (v: number | null) => string }) {
  const host = useRef<HTMLDivElement>(null);
  const [error, setError] = useState<string | undefined>(undefined);
  const { spec, height } = props;
  useEffect(() => {
    const el = host.current;
    if (!el) return;
    let chart: DrawnChart | undefined;
    let gone = false;
    let observer: ResizeObserver | undefined;
    loadUplot().then(
      (m) => {
        if (gone) return;
        el.replaceChildren();
        chart = m.drawChart(el, spec, Math.max(200, el.clientWidth), height);
        // The widget's width follows the window: the chart follows the widget.
        observer = new ResizeObserver(() => chart?.resize(Math.max(200, el.clientWidth), height));
        observer.observe(el);
      },
      () => setError('The chart could not load; its numbers are in the table below.'),
    );
    return () => {
      gone = true;
      observer?.disconnect();
      chart?.destroy();
    };
  }, [spec, height]);
  return (
    <figure class="chart" aria-label={props.label}>
      <div ref={host} class="chart-canvas" aria-hidden="true" />
      {error && <p class="muted small">{error}</p>}
      <table class="visually-hidden">
        <caption>{props.label}</caption>
        <thead>
          <tr>
            <th scope="col">{spec.xLabel}</th>
            {spec.series.map((s) => (
              <th scope="col">{s.label}</th>
            ))}
          </tr>
        </thead>
        <tbody>
          {spec.x.map((x, i) => (
            <tr>
              <th scope="row">{props.xText(x, i)}</th>
              {spec.series.map((s) => (
                <td>{props.yText(s.values[i] ?? null)}</td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </figure>
  );
}
