/**
 * Dashboards (`#/dashboards/NAME`): the workspace's dashboard_widget placements of one
 * dashboard on a 12-column grid by position, each reading its numbers through factAggregate
 * and showing the query it sent. Widgets refresh every REFRESH_MS while the tab is visible.
 * Placing, editing, moving, resizing and deleting go through the JSON:API (docs/console.md,
 * "Dashboards"); every control is a button, so the keyboard does all that a pointer does.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import type { TributaryClient } from '@tributary/client';
import { useClient, useLoad } from '../api.ts';
import { href, navigate } from '../router.ts';
import { ConfirmDelete } from '../ui/confirm-delete.tsx';
import { Copyable, Empty, ErrorNotice, Field, Loading, Page } from '../ui/index.tsx';
import { aggregateRequest, runAggregate, type WidgetConfig } from './aggregate-query.ts';
import { curlLine, loadModels, type Model } from './facts-query.tsx';
import { AggregateBody, type Kind } from './widget-view.tsx';

/** How often a visible dashboard reads its widgets again (docs/console.md). */
export const REFRESH_MS = 60_000;
const COLUMNS = 12;
const MAX_HEIGHT = 24;
const KINDS: Kind[] = ['number', 'line', 'bar', 'table'];

interface Position {
  x: number;
  y: number;
  w: number;
  h: number;
}

export interface Widget {
  id: string;
  dashboard: string;
  kind: string;
  title: string | null;
  dataModelId: string | null;
  slug: string | undefined;
  position: Position;
  config: WidgetConfig;
}

interface Resource {
  type: string;
  id: string;
  attributes: Record<string, unknown>;
}

const toWidget = (r: Resource, slugs: Map<string, string>): Widget => {
  const a = r.attributes;
  const modelId = (a.data_model_id as string | null) ?? null;
  return {
    id: r.id,
    dashboard: String(a.dashboard ?? 'home'),
    kind: String(a.kind),
    title: (a.title as string | null) ?? null,
    dataModelId: modelId,
    slug: modelId === null ? undefined : slugs.get(modelId),
    position: a.position as Position,
    config: (a.config as WidgetConfig | null) ?? {},
  };
};

async function loadWidgets(client: TributaryClient): Promise<Widget[]> {
  const doc = (await client.request('GET', '/dashboard_widgets?include=data_model&page[limit]=250')) as { data: Resource[]; included?: Resource[] };
  const slugs = new Map((doc.included ?? []).filter((r) => r.type === 'data_model').map((r) => [r.id, String(r.attributes.slug)]));
  return doc.data.map((r) => toWidget(r, slugs));
}

/** A count that goes up every REFRESH_MS while the tab is visible, and at once when it becomes visible again. */
function useRefreshTick(): [number, () => void] {
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let timer: ReturnType<typeof setInterval> | undefined;
    const start = () => {
      clearInterval(timer);
      timer = setInterval(() => setTick((t) => t + 1), REFRESH_MS);
    };
    const onVisibility = () => {
      if (document.visibilityState === 'visible') {
        setTick((t) => t + 1);
        start();
      } else clearInterval(timer);
    };
    if (document.visibilityState === 'visible') start();
    document.addEventListener('visibilitychange', onVisibility);
    return () => {
      clearInterval(timer);
      document.removeEventListener('visibilitychange', onVisibility);
    };
  }, []);
  return [tick, () => setTick((t) => t + 1)];
}

const widgetDoc = (attributes: Record<string, unknown>, id?: string) => ({ data: { type: 'dashboard_widget', ...(id ? { id } : {}), attributes } });

function WidgetQuery(props: { document: string; variables: Record<string, unknown> }) {
  return (
    <details class="widget-query">
      <summary>Query</summary>
      <Copyable label="GraphQL query" text={props.document} />
      <Copyable label="Variables" text={JSON.stringify(props.variables, null, 2)} />
      <Copyable label="Curl command" text={curlLine(props.document, props.variables)} />
    </details>
  );
}

type Step = { label: string; control: string; change: (p: Position) => Position; say: (p: Position) => string };

const STEPS: Step[] = [
  { label: '←', control: 'left', change: (p) => ({ ...p, x: Math.max(0, p.x - 1) }), say: (p) => `column ${p.x + 1}` },
  { label: '→', control: 'right', change: (p) => ({ ...p, x: Math.min(COLUMNS - p.w, p.x + 1) }), say: (p) => `column ${p.x + 1}` },
  { label: '↑', control: 'up', change: (p) => ({ ...p, y: Math.max(0, p.y - 1) }), say: (p) => `row ${p.y + 1}` },
  { label: '↓', control: 'down', change: (p) => ({ ...p, y: p.y + 1 }), say: (p) => `row ${p.y + 1}` },
  { label: 'Narrower', control: 'narrower', change: (p) => ({ ...p, w: Math.max(1, p.w - 1) }), say: (p) => `${p.w} columns wide` },
  { label: 'Wider', control: 'wider', change: (p) => ({ ...p, w: Math.min(COLUMNS - p.x, p.w + 1) }), say: (p) => `${p.w} columns wide` },
  { label: 'Shorter', control: 'shorter', change: (p) => ({ ...p, h: Math.max(1, p.h - 1) }), say: (p) => `${p.h} rows high` },
  { label: 'Taller', control: 'taller', change: (p) => ({ ...p, h: Math.min(MAX_HEIGHT, p.h + 1) }), say: (p) => `${p.h} rows high` },
];

const STEP_NAMES: Record<string, string> = { left: 'Move left', right: 'Move right', up: 'Move up', down: 'Move down' };

function WidgetCard(props: {
  widget: Widget;
  tick: number;
  onPlace: (w: Widget, step: Step, title: string) => void;
  onEdit: (w: Widget) => void;
  onDelete: (w: Widget) => Promise<unknown>;
}) {
  const { widget, tick } = props;
  const client = useClient();
  const title = widget.title ?? `${widget.kind} of ${widget.slug ?? 'a data model'}`;
  const known = (KINDS as string[]).includes(widget.kind);
  // The request is made at each load, so the window ends at the refresh's now.
  const [request, setRequest] = useState(() => (widget.slug ? aggregateRequest('Widget', widget.slug, widget.config, Date.now()) : undefined));
  const configKey = JSON.stringify([widget.slug, widget.config]);
  const answer = useLoad(async () => {
    if (!widget.slug || !known) return undefined;
    const r = aggregateRequest('Widget', widget.slug, widget.config, Date.now());
    setRequest(r);
    return runAggregate(client, r);
  }, [client, configKey, tick]);
  const { x, y, w, h } = widget.position;
  // The card is h rows of 80px with 12px gaps; its title and its controls take about 110px of it.
  const chartHeight = Math.max(100, h * 92 - 12 - 110);
  return (
    <article
      class="widget"
      aria-labelledby={`w-${widget.id}`}
      data-widget={widget.id}
      style={{ gridColumn: `${x + 1} / span ${w}`, gridRow: `${y + 1} / span ${h}` }}
    >
      <header class="widget-head">
        <h2 id={`w-${widget.id}`}>{title}</h2>
        <span class="muted small">
          {widget.kind} · {widget.slug ?? 'no data model'}
        </span>
      </header>
      <div class="widget-body" aria-busy={answer.loading}>
        {!known && <Empty>This widget's kind, {widget.kind}, is not one the console draws: edit it to number, line, bar or table.</Empty>}
        {known && !widget.slug && <Empty>This widget names no data model of this workspace.</Empty>}
        <ErrorNotice error={answer.error} title="The widget's query was refused" />
        {answer.loading && !answer.data && known && widget.slug && <Loading label="Loading…" />}
        {answer.data && known && <AggregateBody kind={widget.kind as Kind} config={widget.config} answer={answer.data} title={title} height={chartHeight} />}
      </div>
      <footer class="widget-foot">
        {request && <WidgetQuery document={request.document} variables={request.variables} />}
        <div class="widget-controls" role="group" aria-label={`Place ${title}`}>
          {STEPS.map((s) => (
            <button
              type="button"
              class="secondary small-button"
              data-control={s.control}
              aria-label={`${STEP_NAMES[s.control] ?? s.label}: ${title}`}
              onClick={() => props.onPlace(widget, s, title)}
            >
              {s.label}
            </button>
          ))}
          <button type="button" class="secondary small-button" onClick={() => props.onEdit(widget)} aria-label={`Edit ${title}`}>
            Edit
          </button>
          <ConfirmDelete what="widget" name={title} after={href('dashboards', widget.dashboard)} onDelete={() => props.onDelete(widget)}>
            <p>The widget goes; its data model and facts stay.</p>
          </ConfirmDelete>
        </div>
      </footer>
    </article>
  );
}

interface FormState {
  id?: string;
  title: string;
  dashboard: string;
  dataModelId: string;
  kind: string;
  config: string;
}

const EXAMPLE_CONFIG = '{\n  "mode": "timeline",\n  "window": "P90D",\n  "bucket": "day"\n}';

function WidgetForm(props: { initial: FormState; models: Model[]; onSave: (f: FormState) => Promise<void>; onCancel: () => void }) {
  const [f, setF] = useState(props.initial);
  const [error, setError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);
  const set = (k: keyof FormState) => (e: Event) => setF({ ...f, [k]: (e.currentTarget as HTMLInputElement).value });
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      await props.onSave(f);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="widget-form section" aria-labelledby="widget-form-title" onSubmit={submit}>
      <h2 id="widget-form-title">{f.id ? 'Edit widget' : 'Add widget'}</h2>
      <div class="filters">
        <Field label="Title">
          <input value={f.title} onInput={set('title')} />
        </Field>
        <Field label="Dashboard">
          <input value={f.dashboard} onInput={set('dashboard')} required />
        </Field>
        <Field label="Data model">
          <select value={f.dataModelId} onChange={set('dataModelId')} required>
            {props.models.map((m) => (
              <option value={m.id}>{m.name}</option>
            ))}
          </select>
        </Field>
        <Field label="Kind">
          <select value={f.kind} onChange={set('kind')}>
            {KINDS.map((k) => (
              <option value={k}>{k}</option>
            ))}
          </select>
        </Field>
      </div>
      <Field
        label="Config (JSON)"
        hint="factAggregate's arguments besides the slug, a window such as P90D, the measure shown, a unit and colours: see docs/console.md, Dashboards."
      >
        <textarea value={f.config} onInput={set('config')} rows={8} spellcheck={false} class="mono" />
      </Field>
      <ErrorNotice error={error} title="The widget was not saved" />
      <div class="form-actions">
        <button type="submit" disabled={busy} aria-busy={busy}>
          {busy ? 'Saving…' : 'Save widget'}
        </button>
        <button type="button" class="secondary" onClick={props.onCancel}>
          Cancel
        </button>
      </div>
    </form>
  );
}

export function DashboardsPage(props: { dashboard: string | undefined }) {
  const client = useClient();
  const widgets = useLoad(() => loadWidgets(client), [client]);
  const models = useLoad(() => loadModels(client), [client]);
  const [tick, refreshNow] = useRefreshTick();
  const [list, setList] = useState<Widget[] | undefined>(undefined);
  const [form, setForm] = useState<FormState | undefined>(undefined);
  const [said, setSaid] = useState('');
  const [placeError, setPlaceError] = useState<unknown>(undefined);
  const refocus = useRef<{ id: string; control: string } | undefined>(undefined);
  // Presses are applied one after the other, each to the position the one before left: two
  // quick presses never PATCH from the same stale position.
  const placing = useRef<Promise<void>>(Promise.resolve());
  const placedAt = useRef(new Map<string, Position>());
  useEffect(() => {
    placedAt.current.clear();
    setList(widgets.data);
  }, [widgets.data]);
  // A moved widget's button keeps the focus, wherever its widget now is in the page.
  useEffect(() => {
    const r = refocus.current;
    if (!r) return;
    refocus.current = undefined;
    document.querySelector<HTMLButtonElement>(`[data-widget="${r.id}"] [data-control="${r.control}"]`)?.focus();
  });

  const all = list ?? [];
  const names = [...new Set(all.map((w) => w.dashboard))].sort();
  const current = props.dashboard ?? names[0] ?? 'home';
  const shown = all.filter((w) => w.dashboard === current).sort((a, b) => a.position.y - b.position.y || a.position.x - b.position.x);

  const place = (w: Widget, step: Step, title: string) => {
    placing.current = placing.current.then(async () => {
      setPlaceError(undefined);
      const from = placedAt.current.get(w.id) ?? w.position;
      const to = step.change(from);
      const sentence = `${title}: ${step.say(to)}`;
      if (JSON.stringify(to) === JSON.stringify(from)) {
        setSaid(`${sentence}: already there`);
        return;
      }
      try {
        await client.request('PATCH', `/dashboard_widgets/${encodeURIComponent(w.id)}`, widgetDoc({ position: to }, w.id));
        placedAt.current.set(w.id, to);
        refocus.current = { id: w.id, control: step.control };
        setList((l) => l?.map((x) => (x.id === w.id ? { ...x, position: to } : x)));
        setSaid(sentence);
      } catch (err) {
        setPlaceError(err);
      }
    });
  };

  const save = async (f: FormState) => {
    let config: unknown;
    try {
      config = f.config.trim() === '' ? {} : JSON.parse(f.config);
    } catch {
      throw new Error('The config is not JSON: fix it, or leave it empty for a count of the entities.');
    }
    const attributes: Record<string, unknown> = {
      title: f.title.trim() || null,
      dashboard: f.dashboard.trim(),
      data_model_id: f.dataModelId,
      kind: f.kind,
      config,
    };
    if (f.id) await client.request('PATCH', `/dashboard_widgets/${encodeURIComponent(f.id)}`, widgetDoc(attributes, f.id));
    else {
      // A new widget goes below the others of its dashboard.
      const bottom = Math.max(0, ...all.filter((w) => w.dashboard === attributes.dashboard).map((w) => w.position.y + w.position.h));
      await client.request('POST', '/dashboard_widgets', widgetDoc({ ...attributes, position: { x: 0, y: bottom, w: 6, h: 4 } }));
    }
    setForm(undefined);
    widgets.reload();
    if (attributes.dashboard !== current) navigate(href('dashboards', String(attributes.dashboard)));
  };

  const edit = (w: Widget) =>
    setForm({
      id: w.id,
      title: w.title ?? '',
      dashboard: w.dashboard,
      dataModelId: w.dataModelId ?? '',
      kind: w.kind,
      config: JSON.stringify(w.config, null, 2),
    });
  const add = () => setForm({ title: '', dashboard: current, dataModelId: models.data?.[0]?.id ?? '', kind: 'line', config: EXAMPLE_CONFIG });

  return (
    <Page
      title={`Dashboard ${current}`}
      actions={
        <>
          <button
            type="button"
            class="secondary"
            onClick={() => {
              widgets.reload();
              refreshNow();
            }}
          >
            Refresh
          </button>
          <button type="button" onClick={add} disabled={!models.data || models.data.length === 0}>
            Add widget
          </button>
        </>
      }
    >
      {names.length > 1 && (
        <nav class="tabs" aria-label="Dashboards">
          {names.map((n) => (
            <a href={href('dashboards', n)} aria-current={n === current ? 'page' : undefined}>
              {n}
            </a>
          ))}
        </nav>
      )}
      <p class="muted small">Widgets refresh every {REFRESH_MS / 1000} seconds while this tab is visible.</p>
      <p class="visually-hidden" role="status" aria-live="polite">
        {said}
      </p>
      <ErrorNotice error={widgets.error} title="Could not load the widgets" />
      <ErrorNotice error={placeError} title="The widget did not move" />
      {form && models.data && <WidgetForm key={form.id ?? 'new'} initial={form} models={models.data} onSave={save} onCancel={() => setForm(undefined)} />}
      {widgets.loading && !list && <Loading label="Loading the widgets…" />}
      {list && shown.length === 0 && (
        <Empty>
          The dashboard {current} has no widgets yet. Choose <strong>Add widget</strong>, or place one with <code>POST /api/json/v1/dashboard_widgets</code>.
        </Empty>
      )}
      {shown.length > 0 && (
        <div class="dashboard-grid" data-testid="dashboard-grid">
          {shown.map((w) => (
            <WidgetCard
              key={w.id}
              widget={w}
              tick={tick}
              onPlace={place}
              onEdit={edit}
              onDelete={async (x) => {
                await client.request('DELETE', `/dashboard_widgets/${encodeURIComponent(x.id)}`);
                setList((l) => l?.filter((y) => y.id !== x.id));
              }}
            />
          ))}
        </div>
      )}
    </Page>
  );
}
