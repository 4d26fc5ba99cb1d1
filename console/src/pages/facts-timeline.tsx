/**
 * One entity's facts over observed_at (factQuery mode timeline, filtered on the primary key):
 * a chart of its numeric fields and, below it, the same facts as a table, which is also the
 * chart's accessible alternative.
 */
import { useState } from 'preact/hooks';
import { useClient, useLoad } from '../api.ts';
import { href, navigate } from '../router.ts';
import { Empty, ErrorNotice, Loading, Page, Section, Time } from '../ui/index.tsx';
import { ChartLegend, TimeChart, formatTime, type Series } from '../ui/time-chart.tsx';
import { ShownQuery, factDocument, isNumeric, runFactQuery, type Answer, type Model, type ModelField, type Variables } from './facts-query.tsx';
import { FactCells } from './facts-latest.tsx';
import { FactPager, pageFrom } from './facts-pager.tsx';

const YEAR_MS = 366 * 86_400_000;

interface Span {
  since?: string | undefined;
  until?: string | undefined;
}

/** The entity id (always text in the API's answer) as a value of the primary key's type. */
function entityValue(pk: ModelField, entity: string): unknown {
  if (isNumeric(pk) && entity.trim() !== '' && Number.isFinite(Number(entity))) return Number(entity);
  if (pk.type === 'boolean' && (entity === 'true' || entity === 'false')) return entity === 'true';
  return entity;
}

/**
 * The window to read: the route's, or the 366 days (the longest the API reads) that end just
 * after the entity's latest fact, so an entity last seen long ago still shows its history.
 */
async function windowOf(load: () => Promise<Answer>, query: URLSearchParams): Promise<Span> {
  const since = query.get('since') ?? undefined;
  const until = query.get('until') ?? undefined;
  if (since || until) return { since, until };
  const latest = (await load()).facts[0];
  if (!latest) return {};
  const end = Date.parse(latest.observedAt) + 1;
  return { since: new Date(end - YEAR_MS).toISOString(), until: new Date(end).toISOString() };
}

function WindowForm(props: { since?: string; until?: string; onShow: (since: string, until: string) => void }) {
  const [since, setSince] = useState(props.since ?? '');
  const [until, setUntil] = useState(props.until ?? '');
  return (
    <form
      class="filters"
      aria-label="Time window"
      onSubmit={(e) => {
        e.preventDefault();
        props.onShow(since.trim(), until.trim());
      }}
    >
      <label class="field">
        <span class="field-label">Since (inclusive)</span>
        <input value={since} onInput={(e) => setSince((e.currentTarget as HTMLInputElement).value)} spellcheck={false} size={26} />
      </label>
      <label class="field">
        <span class="field-label">Until (exclusive)</span>
        <input value={until} onInput={(e) => setUntil((e.currentTarget as HTMLInputElement).value)} spellcheck={false} size={26} />
      </label>
      <button type="submit" class="secondary">
        Show this window
      </button>
      <span class="field-hint muted small">ISO 8601 with a zone; at most 366 days.</span>
    </form>
  );
}

export function TimelineView(props: { model: Model; entity: string; query: URLSearchParams }) {
  const { model, entity, query } = props;
  const client = useClient();
  const pk = model.fields.find((f) => f.isPrimaryKey);
  const filters = pk ? JSON.stringify([{ field: pk.name, op: 'eq', value: entityValue(pk, entity) }]) : undefined;
  const routeWindow = `${query.get('since') ?? ''}|${query.get('until') ?? ''}`;
  const span = useLoad<Span>(
    () =>
      filters
        ? windowOf(
            () =>
              runFactQuery(client, factDocument('LatestFact', { dataModelSlug: model.slug, filters, limit: 1 }), {
                dataModelSlug: model.slug,
                filters,
                limit: 1,
              }),
            query,
          )
        : Promise.resolve({}),
    [client, model.slug, filters, routeWindow],
  );
  const { page, limit } = pageFrom(query, 250);
  const variables: Variables = { dataModelSlug: model.slug, mode: 'timeline' };
  if (filters) variables.filters = filters;
  if (span.data?.since) variables.since = span.data.since;
  if (span.data?.until) variables.until = span.data.until;
  variables.sort = 'observed_at';
  variables.sortDirection = 'asc';
  variables.limit = limit;
  variables.offset = (page - 1) * limit;
  const document = factDocument('EntityTimeline', variables);
  const key = JSON.stringify(variables);
  const answer = useLoad(() => (span.data ? runFactQuery(client, document, variables) : Promise.resolve(undefined)), [client, key, span.data]);

  const numeric = model.fields.filter(isNumeric);
  const seriesParam = query.get('series');
  const chosen = seriesParam === null ? numeric.map((f) => f.name) : seriesParam.split(',').filter((n) => numeric.some((f) => f.name === n));
  const routeWith = (changes: Record<string, string | undefined>) => href('facts', model.slug, { ...Object.fromEntries(query), ...changes });
  const toggle = (name: string, on: boolean) => {
    const next = numeric.map((f) => f.name).filter((n) => (n === name ? on : chosen.includes(n)));
    navigate(routeWith({ series: next.join(',') }), { replace: true });
  };

  const title = `History of ${entity}`;
  const back = (
    <a href={href('facts', model.slug)} class="muted">
      Latest facts of {model.name}
    </a>
  );
  if (!pk) {
    return (
      <Page title={title} actions={back}>
        <Empty>The data model {model.name} has no primary key, so its facts have no entity to follow.</Empty>
      </Page>
    );
  }
  const facts = answer.data?.facts ?? [];
  const series: Series[] = chosen.map((name) => ({
    name,
    points: facts.flatMap((f) => {
      const v = f.data[name];
      return typeof v === 'number' && Number.isFinite(v) ? [{ t: Date.parse(f.observedAt), v }] : [];
    }),
  }));
  const first = facts[0];
  const last = facts[facts.length - 1];
  const ranges = series
    .filter((s) => s.points.length > 0)
    .map((s) => `${s.name} from ${Math.min(...s.points.map((p) => p.v))} to ${Math.max(...s.points.map((p) => p.v))}`)
    .join('; ');
  const chartLabel =
    first && last
      ? `${chosen.join(' and ')} of ${entity} over observed at: ${facts.length} facts from ${formatTime(Date.parse(first.observedAt))} to ${formatTime(Date.parse(last.observedAt))}${ranges ? `; ${ranges}` : ''}`
      : `No facts of ${entity}`;

  return (
    <Page title={title} actions={back}>
      <p class="muted">
        Every fact of {pk.name} <code>{entity}</code> in {model.name}, oldest first.
      </p>
      <ErrorNotice error={span.error} title="Could not find the entity's latest fact" />
      {span.data && (
        <WindowForm
          key={routeWindow}
          since={span.data.since}
          until={span.data.until}
          onShow={(since, until) => navigate(routeWith({ since: since || undefined, until: until || undefined, page: undefined }))}
        />
      )}
      <ErrorNotice error={answer.error} title="The query was refused" />
      {(span.loading || answer.loading) && !answer.data && <Loading label="Loading the history…" />}
      {answer.data && facts.length === 0 && <Empty>No facts of {entity} in this window.</Empty>}
      {answer.data && facts.length > 0 && (
        <>
          <Section title="Chart">
            {numeric.length === 0 ? (
              <p class="muted">This data model has no numeric field to draw.</p>
            ) : (
              <>
                <fieldset class="series-picker">
                  <legend>Series to draw</legend>
                  {numeric.map((f) => (
                    <label>
                      <input
                        type="checkbox"
                        checked={chosen.includes(f.name)}
                        onChange={(e) => toggle(f.name, (e.currentTarget as HTMLInputElement).checked)}
                      />
                      {f.name}
                    </label>
                  ))}
                </fieldset>
                {chosen.length === 0 ? (
                  <p class="muted">Choose a series to draw.</p>
                ) : (
                  <figure class="chart-figure" data-testid="timeline-chart">
                    <TimeChart series={series} label={chartLabel} xLabel="observed at" yLabel={chosen.join(', ')} />
                    <ChartLegend names={chosen} />
                  </figure>
                )}
              </>
            )}
          </Section>
          <Section title="Facts">
            <div class="table-wrap">
              <table data-testid="timeline-facts">
                <caption class="visually-hidden">Facts of {entity}, oldest first</caption>
                <thead>
                  <tr>
                    <th scope="col">Observed at</th>
                    {model.fields.map((f) => (
                      <th scope="col" class={isNumeric(f) ? 'num' : undefined}>
                        {f.name}
                      </th>
                    ))}
                    <th scope="col">Inserted at</th>
                  </tr>
                </thead>
                <tbody>
                  {facts.map((r) => (
                    <tr key={r.id}>
                      <FactCells model={model} fact={r} />
                      <td>
                        <Time value={r.insertedAt} />
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
            <FactPager answer={answer.data} noun="facts" route={routeWith} />
          </Section>
        </>
      )}
      {span.data && <ShownQuery document={document} variables={variables} />}
    </Page>
  );
}
