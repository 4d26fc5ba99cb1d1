/** The runs list's filters: each change goes to the address, which the list reads back. */
import { navigate } from '../router.ts';
import { Field } from '../ui/index.tsx';
import { RUN_OUTCOMES, RUN_STATUSES, hasFilter, runsHref, type RunFilters } from './runs-model.tsx';

/** An ISO instant as a datetime-local input's value, in the reader's time zone. */
function toLocalInput(iso: string | undefined): string {
  if (!iso) return '';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return '';
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

/** A datetime-local value (local time) as an ISO instant, which the address keeps so a shared view means the same span anywhere. */
function fromLocalInput(value: string, end: boolean): string | undefined {
  if (!value) return undefined;
  const d = new Date(value);
  if (Number.isNaN(d.getTime())) return undefined;
  // "Until 10:05" includes the whole minute.
  if (end) d.setSeconds(59, 999);
  return d.toISOString();
}

export function RunFiltersForm(props: { filters: RunFilters; workflows: Array<{ id: string; name: string }> }) {
  const f = props.filters;
  const set = (patch: Partial<RunFilters>) => navigate(runsHref({ ...f, ...patch }));
  const value = (e: Event) => (e.currentTarget as HTMLInputElement | HTMLSelectElement).value.trim() || undefined;
  return (
    <form class="filters" aria-label="Filter runs" onSubmit={(e) => e.preventDefault()}>
      <Field label="Workflow">
        <select value={f.workflow ?? ''} onChange={(e) => set({ workflow: value(e) })}>
          <option value="">Any workflow</option>
          {props.workflows.map((w) => (
            <option value={w.id}>{w.name}</option>
          ))}
          {f.workflow && !props.workflows.some((w) => w.id === f.workflow) && <option value={f.workflow}>{f.workflow}</option>}
        </select>
      </Field>
      {(
        [
          ['status', 'Status', RUN_STATUSES],
          ['outcome', 'Outcome', RUN_OUTCOMES],
        ] as const
      ).map(([k, label, values]) => (
        <Field label={label}>
          <select value={f[k] ?? ''} onChange={(e) => set({ [k]: value(e) })}>
            <option value="">Any {label.toLowerCase()}</option>
            {values.map((v) => (
              <option value={v}>{v.replaceAll('_', ' ')}</option>
            ))}
          </select>
        </Field>
      ))}
      <Field label="Trigger">
        <input value={f.trigger ?? ''} placeholder="trigger key" spellcheck={false} onChange={(e) => set({ trigger: value(e) })} />
      </Field>
      {(
        [
          ['from', 'Inserted from'],
          ['until', 'Inserted until'],
        ] as const
      ).map(([k, label]) => (
        <Field label={label}>
          <input
            type="datetime-local"
            value={toLocalInput(f[k])}
            onChange={(e) => set({ [k]: fromLocalInput((e.currentTarget as HTMLInputElement).value, k === 'until') })}
          />
        </Field>
      ))}
      {hasFilter(f) && (
        <a class="clear-filters" href={runsHref({})}>
          Clear filters
        </a>
      )}
    </form>
  );
}
