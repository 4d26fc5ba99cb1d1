/**
 * The Facts page's "group by" view (`#/facts/MODEL?view=group&groupBy=status&measure=sum:amount&bucket=day`):
 * factAggregate over the model, grouped by up to three fields, with one measure and an
 * optional bucket, drawn as a table. The conditions of the latest view (`filters=`) apply
 * here too; the view shows the query it sent, as the others do.
 */
import { useState } from 'preact/hooks';
import { useClient, useLoad } from '../api.ts';
import { href, navigate } from '../router.ts';
import { ErrorNotice, Field, Loading, Page, Section } from '../ui/index.tsx';
import { aggregateRequest, runAggregate, type WidgetConfig } from './aggregate-query.ts';
import { conditionsFrom, describeCondition, isNumeric, ShownQuery, type Model } from './facts-query.tsx';
import { AggregateBody } from './widget-view.tsx';

const BUCKETS = ['minute', 'hour', 'day', 'week', 'month'] as const;
const FIELD_OPS = ['sum', 'avg', 'min', 'max'] as const;

/** `count`, `count_distinct_entities` or `op:field`, as the route keeps it. */
function measureOf(text: string | null): NonNullable<WidgetConfig['measures']>[number] {
  if (!text || text === 'count') return { op: 'count' };
  if (text === 'count_distinct_entities') return { op: 'count_distinct_entities' };
  const [op, field] = text.split(':', 2);
  return (FIELD_OPS as readonly string[]).includes(op ?? '') && field ? { op: op as (typeof FIELD_OPS)[number], field } : { op: 'count' };
}

/** The view's choices as a widget config: the same arguments a table widget would send. */
export function groupConfig(query: URLSearchParams): WidgetConfig {
  const groupBy = (query.get('groupBy') ?? '').split(',').filter(Boolean).slice(0, 3);
  const bucket = query.get('bucket') as WidgetConfig['bucket'] | null;
  const mode = query.get('mode') === 'timeline' ? 'timeline' : 'latest';
  const filters = conditionsFrom(query).map((c) => ({ field: c.field, op: c.op, value: c.value }));
  const c: WidgetConfig = { mode, measures: [measureOf(query.get('measure'))] };
  if (filters.length > 0) c.filters = filters;
  if (groupBy.length > 0) c.groupBy = groupBy;
  if (bucket && (BUCKETS as readonly string[]).includes(bucket)) c.bucket = bucket;
  return c;
}

function GroupForm(props: { model: Model; query: URLSearchParams; onShow: (changes: Record<string, string | undefined>) => void }) {
  const { model, query } = props;
  const [groupBy, setGroupBy] = useState<string[]>((query.get('groupBy') ?? '').split(',').filter(Boolean));
  const [measure, setMeasure] = useState(query.get('measure') ?? 'count');
  const [bucket, setBucket] = useState(query.get('bucket') ?? '');
  const [mode, setMode] = useState(query.get('mode') ?? 'latest');
  const numeric = model.fields.filter(isNumeric);
  const toggle = (name: string, on: boolean) => setGroupBy((g) => (on ? [...g.filter((n) => n !== name), name].slice(0, 3) : g.filter((n) => n !== name)));
  return (
    <form
      class="filters"
      aria-label="Group by"
      onSubmit={(e) => {
        e.preventDefault();
        props.onShow({ groupBy: groupBy.join(',') || undefined, measure, bucket: bucket || undefined, mode });
      }}
    >
      <fieldset class="series-picker">
        <legend>Group by (up to 3, in the order ticked)</legend>
        {model.fields.map((f) => (
          <label>
            <input
              type="checkbox"
              checked={groupBy.includes(f.name)}
              disabled={!groupBy.includes(f.name) && groupBy.length >= 3}
              onChange={(e) => toggle(f.name, (e.currentTarget as HTMLInputElement).checked)}
            />
            {f.name}
          </label>
        ))}
      </fieldset>
      <Field label="Measure">
        <select value={measure} onChange={(e) => setMeasure((e.currentTarget as HTMLSelectElement).value)}>
          <option value="count">count</option>
          <option value="count_distinct_entities">count of distinct entities</option>
          {numeric.flatMap((f) => FIELD_OPS.map((op) => <option value={`${op}:${f.name}`}>{`${op} of ${f.name}`}</option>))}
        </select>
      </Field>
      <Field label="Bucket">
        <select value={bucket} onChange={(e) => setBucket((e.currentTarget as HTMLSelectElement).value)}>
          <option value="">none</option>
          {BUCKETS.map((b) => (
            <option value={b}>{b}</option>
          ))}
        </select>
      </Field>
      <Field label="Mode">
        <select value={mode} onChange={(e) => setMode((e.currentTarget as HTMLSelectElement).value)}>
          <option value="latest">latest (entities)</option>
          <option value="timeline">timeline (every fact, last 90 days)</option>
        </select>
      </Field>
      <button type="submit" class="secondary">
        Show groups
      </button>
    </form>
  );
}

export function GroupView(props: { model: Model; query: URLSearchParams }) {
  const { model, query } = props;
  const client = useClient();
  const config = groupConfig(query);
  const key = JSON.stringify(config);
  const request = aggregateRequest('FactGroups', model.slug, config, Date.now());
  const answer = useLoad(() => runAggregate(client, request), [client, model.slug, key]);
  const routeWith = (changes: Record<string, string | undefined>) => href('facts', model.slug, { ...Object.fromEntries(query), ...changes });
  const conditions = conditionsFrom(query);
  return (
    <Page
      title={`Groups of ${model.name}`}
      actions={
        <a href={href('facts', model.slug, { filters: query.get('filters') ?? undefined })} class="muted">
          Latest facts of {model.name}
        </a>
      }
    >
      <p class="muted">
        factAggregate over {model.name}: one row per group, {config.mode === 'timeline' ? 'counting facts' : 'counting entities by their latest fact'}.
        {conditions.length > 0 && ` Conditions: ${conditions.map(describeCondition).join('; ')}.`}
      </p>
      <GroupForm key={key} model={model} query={query} onShow={(changes) => navigate(routeWith({ view: 'group', ...changes }))} />
      <ErrorNotice error={answer.error} title="The query was refused" />
      {answer.loading && !answer.data && <Loading label="Loading the groups…" />}
      {answer.data && (
        <Section title="Groups">
          <p class="muted small" data-testid="group-count">
            {answer.data.groups.length} groups{answer.data.groupsCut ? ' (more matched: the first 1,000 are shown)' : ''}
          </p>
          <AggregateBody kind="table" config={config} answer={answer.data} title={`Groups of ${model.name}`} height={0} />
        </Section>
      )}
      <ShownQuery document={request.document} variables={request.variables} />
    </Page>
  );
}
