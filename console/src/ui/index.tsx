/**
 * The console's few building blocks. Native elements only (a, button, input, select,
 * table), so every action is reachable by keyboard and read right by a screen reader.
 */
import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { describeError } from '../api.ts';

export function Page(props: { title: string; actions?: ComponentChildren; children: ComponentChildren }) {
  const heading = useRef<HTMLHeadingElement>(null);
  // A new page takes the focus, so a keyboard or screen-reader user starts at its heading.
  useEffect(() => heading.current?.focus(), [props.title]);
  return (
    <section class="page" aria-labelledby="page-title">
      <header class="page-head">
        <h1 id="page-title" tabIndex={-1} ref={heading}>
          {props.title}
        </h1>
        {props.actions && <div class="page-actions">{props.actions}</div>}
      </header>
      {props.children}
    </section>
  );
}

export function Section(props: { title: string; children: ComponentChildren; actions?: ComponentChildren }) {
  return (
    <section class="section">
      <div class="section-head">
        <h2>{props.title}</h2>
        {props.actions}
      </div>
      {props.children}
    </section>
  );
}

/** An error as a person reads it, with the API's code and the request id to quote. */
export function ErrorNotice(props: { error: unknown; title?: string }) {
  if (props.error === undefined || props.error === null) return null;
  const e = describeError(props.error);
  return (
    <div class="notice error" role="alert">
      <strong>{props.title ?? 'Something went wrong'}</strong>
      <p>{e.message}</p>
      {(e.code || e.requestId) && (
        <p class="muted small">
          {e.code && <span>code {e.code}</span>}
          {e.code && e.requestId && ' · '}
          {e.requestId && <span>request {e.requestId}</span>}
        </p>
      )}
    </div>
  );
}

export function Loading(props: { label?: string }) {
  return (
    <p class="muted" role="status">
      {props.label ?? 'Loading…'}
    </p>
  );
}

export function Empty(props: { children: ComponentChildren }) {
  return <p class="empty muted">{props.children}</p>;
}

const STATUS_TONE: Record<string, string> = {
  succeeded: 'ok',
  completed: 'ok',
  verified: 'ok',
  active: 'ok',
  failed: 'bad',
  dead_letter: 'bad',
  failing: 'bad',
  retrying: 'warn',
  stopped_at_condition: 'warn',
  unverified: 'warn',
  running: 'info',
  queued: 'info',
  waiting: 'info',
  skipped: 'muted',
};

/** A status word with its colour; the word itself carries the meaning, never the colour alone. */
export function Badge(props: { value: string | null | undefined }) {
  if (!props.value) return <span class="muted">—</span>;
  return <span class={`badge ${STATUS_TONE[props.value] ?? 'muted'}`}>{props.value.replaceAll('_', ' ')}</span>;
}

/** A timestamp, shown in the reader's time zone, with the exact instant on hover. */
export function Time(props: { value: string | null | undefined }) {
  if (!props.value) return <span class="muted">—</span>;
  const d = new Date(props.value);
  return (
    <time dateTime={props.value} title={props.value}>
      {d.toLocaleString(undefined, { dateStyle: 'short', timeStyle: 'medium' })}
    </time>
  );
}

/** The time between two instants, in ms under a second and seconds above. */
export function Duration(props: { from: string | null | undefined; to: string | null | undefined }) {
  if (!props.from || !props.to) return <span class="muted">—</span>;
  const ms = Date.parse(props.to) - Date.parse(props.from);
  return <span>{ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`}</span>;
}

/** JSON, pretty-printed in a scrollable block; big values stay collapsed until asked. */
export function Json(props: { value: unknown; label?: string }) {
  const text = props.value === undefined ? 'undefined' : JSON.stringify(props.value, null, 2);
  return (
    <pre class="json" tabIndex={0} aria-label={props.label ?? 'JSON'}>
      {text}
    </pre>
  );
}

/** A block of text with a button that copies it. */
export function Copyable(props: { text: string; label: string }) {
  const [copied, setCopied] = useState(false);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(props.text);
      setCopied(true);
      setTimeout(() => setCopied(false), 1500);
    } catch {
      setCopied(false);
    }
  };
  return (
    <div class="copyable">
      <pre tabIndex={0} aria-label={props.label}>
        {props.text}
      </pre>
      <button type="button" class="secondary" onClick={copy}>
        {copied ? 'Copied' : `Copy ${props.label.toLowerCase()}`}
      </button>
    </div>
  );
}

export function Field(props: { label: string; children: ComponentChildren; hint?: string }) {
  return (
    <label class="field">
      <span class="field-label">{props.label}</span>
      {props.children}
      {props.hint && <span class="field-hint muted small">{props.hint}</span>}
    </label>
  );
}

export interface Column<T> {
  title: string;
  cell: (row: T) => ComponentChildren;
  /** Right-aligned numbers. */
  numeric?: boolean;
}

/**
 * A table; `stack`: on a narrow screen each row becomes a block of labelled lines (the
 * header's title before each cell), so a phone reads every column without scrolling sideways.
 * The roles are explicit because a table laid out as blocks loses them in some browsers.
 */
export function Table<T>(props: { caption: string; columns: Column<T>[]; rows: T[]; rowKey: (row: T) => string; empty?: ComponentChildren; stack?: boolean }) {
  if (props.rows.length === 0) return <Empty>{props.empty ?? 'Nothing here yet.'}</Empty>;
  return (
    <div class="table-wrap">
      <table class={props.stack ? 'stack' : undefined} role={props.stack ? 'table' : undefined}>
        <caption class="visually-hidden">{props.caption}</caption>
        <thead role={props.stack ? 'rowgroup' : undefined}>
          <tr role={props.stack ? 'row' : undefined}>
            {props.columns.map((c) => (
              <th scope="col" class={c.numeric ? 'num' : undefined} role={props.stack ? 'columnheader' : undefined}>
                {c.title}
              </th>
            ))}
          </tr>
        </thead>
        <tbody role={props.stack ? 'rowgroup' : undefined}>
          {props.rows.map((row) => (
            <tr key={props.rowKey(row)} role={props.stack ? 'row' : undefined}>
              {props.columns.map((c) => (
                <td class={c.numeric ? 'num' : undefined} data-label={props.stack ? c.title : undefined} role={props.stack ? 'cell' : undefined}>
                  {c.cell(row)}
                </td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** Previous/next over cursor pages (links.prev/next of a JSON:API list). */
export function Pager(props: { onPrev?: (() => void) | undefined; onNext?: (() => void) | undefined; label?: string }) {
  if (!props.onPrev && !props.onNext) return null;
  return (
    <nav class="pager" aria-label={props.label ?? 'Pages'}>
      <button type="button" class="secondary" onClick={props.onPrev} disabled={!props.onPrev}>
        ← Previous
      </button>
      <button type="button" class="secondary" onClick={props.onNext} disabled={!props.onNext}>
        Next →
      </button>
    </nav>
  );
}

/** A button that runs an async action, shows it is busy, and reports its error under it. */
export function ActionButton(props: { label: string; busyLabel?: string; onRun: () => Promise<unknown>; class?: string; disabled?: boolean }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  // A second click before the render that disables the button (two in one task) sends nothing.
  const running = useRef(false);
  const run = async (e: Event) => {
    e.preventDefault();
    if (running.current) return;
    running.current = true;
    setBusy(true);
    setError(undefined);
    try {
      await props.onRun();
    } catch (err) {
      setError(err);
    } finally {
      running.current = false;
      setBusy(false);
    }
  };
  return (
    <span class="action">
      <button type="button" class={props.class} onClick={run} disabled={busy || props.disabled} aria-busy={busy}>
        {busy ? (props.busyLabel ?? `${props.label}…`) : props.label}
      </button>
      <ErrorNotice error={error} title={`${props.label} failed`} />
    </span>
  );
}
