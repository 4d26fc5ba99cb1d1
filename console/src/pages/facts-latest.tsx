/**
 * The latest fact of each entity of one data model, as factQuery (mode latest) answers it:
 * conditions, sorting and pages all live in the route, so the address shows the same view to
 * whoever opens it.
 */
import { useState } from 'preact/hooks';
import { useClient, useLoad } from '../api.ts';
import { href, navigate } from '../router.ts';
import { ErrorNotice, Loading, Page, Section, Time } from '../ui/index.tsx';
import {
  OP_LABELS,
  ShownQuery,
  conditionsFrom,
  describeCondition,
  factDocument,
  isNumeric,
  opsFor,
  parseValue,
  runFactQuery,
  showValue,
  type Condition,
  type Fact,
  type Model,
  type ModelField,
  type Variables,
} from './facts-query.tsx';
import { FactPager, pageFrom } from './facts-pager.tsx';
import { ConfirmDelete } from '../ui/confirm-delete.tsx';

/** The route of this view with some of its query changed (undefined drops a key). */
function routeWith(model: Model, query: URLSearchParams, changes: Record<string, string | undefined>): string {
  return href('facts', model.slug, { ...Object.fromEntries(query), ...changes });
}

function ConditionForm(props: { model: Model; onAdd: (c: Condition) => void }) {
  const fields = props.model.fields;
  const [fieldName, setFieldName] = useState(fields[0]?.name ?? '');
  const field = fields.find((f) => f.name === fieldName) ?? fields[0];
  const ops = opsFor(field?.type ?? null);
  const [opAsked, setOp] = useState(ops[0] ?? 'eq');
  const op = ops.includes(opAsked) ? opAsked : (ops[0] ?? 'eq');
  const [value, setValue] = useState('');
  const [problem, setProblem] = useState<string | undefined>(undefined);
  if (!field) return null;
  const submit = (e: Event) => {
    e.preventDefault();
    try {
      props.onAdd({ field: field.name, op, value: parseValue(op, value, field) });
      setValue('');
      setProblem(undefined);
    } catch (err) {
      setProblem(err instanceof Error ? err.message : String(err));
    }
  };
  const hint =
    op === 'in' || op === 'nin'
      ? 'Values separated by commas.'
      : field.type === 'datetime'
        ? 'An ISO 8601 date-time with a zone, e.g. 2026-07-05T12:00:00Z.'
        : field.type === 'map'
          ? 'A JSON object.'
          : undefined;
  return (
    <form class="filters fact-filter" onSubmit={submit} aria-label="Add a condition">
      <label class="field">
        <span class="field-label">Field</span>
        <select value={field.name} onChange={(e) => setFieldName((e.currentTarget as HTMLSelectElement).value)}>
          {fields.map((f) => (
            <option value={f.name}>
              {f.name} ({f.type ?? 'any'})
            </option>
          ))}
        </select>
      </label>
      <label class="field">
        <span class="field-label">Operator</span>
        <select value={op} onChange={(e) => setOp((e.currentTarget as HTMLSelectElement).value)}>
          {ops.map((o) => (
            <option value={o}>{OP_LABELS[o] ?? o}</option>
          ))}
        </select>
      </label>
      <label class="field">
        <span class="field-label">Value</span>
        {op === 'is_null' || field.type === 'boolean' ? (
          <select value={value || 'true'} onChange={(e) => setValue((e.currentTarget as HTMLSelectElement).value)}>
            <option value="true">{op === 'is_null' ? 'yes, it is empty' : 'true'}</option>
            <option value="false">{op === 'is_null' ? 'no, it has a value' : 'false'}</option>
          </select>
        ) : (
          <input
            value={value}
            onInput={(e) => setValue((e.currentTarget as HTMLInputElement).value)}
            inputMode={isNumeric(field) && op !== 'in' && op !== 'nin' ? 'decimal' : undefined}
            spellcheck={false}
          />
        )}
        {hint && <span class="field-hint muted small">{hint}</span>}
      </label>
      <button type="submit">Add condition</button>
      {problem && (
        <p class="notice error" role="alert">
          {problem}
        </p>
      )}
    </form>
  );
}

/** Compares two values of a field for a sort within the page: numbers as numbers, missing last. */
function compareValues(a: unknown, b: unknown): number {
  const missingA = a === undefined || a === null;
  const missingB = b === undefined || b === null;
  if (missingA || missingB) return missingA === missingB ? 0 : missingA ? 1 : -1;
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  return showValue(a).localeCompare(showValue(b));
}

function SortHeader(props: { title: string; active: boolean; dir: 'asc' | 'desc'; to: string; numeric?: boolean; note?: string }) {
  const next = props.active && props.dir === 'desc' ? 'ascending' : 'descending';
  return (
    <th scope="col" class={props.numeric ? 'num' : undefined} aria-sort={props.active ? (props.dir === 'asc' ? 'ascending' : 'descending') : undefined}>
      <a href={props.to} class="sort-link" aria-label={`${props.title}: sort ${next}${props.note ?? ''}`}>
        {props.title}
        <span aria-hidden="true">{props.active ? (props.dir === 'asc' ? ' ▲' : ' ▼') : ' ⇅'}</span>
      </a>
    </th>
  );
}

export function LatestView(props: { model: Model; query: URLSearchParams }) {
  const { model, query } = props;
  const client = useClient();
  const conditions = conditionsFrom(query);
  const { page, limit } = pageFrom(query);
  const sort = query.get('sort') ?? 'observed_at';
  const dir: 'asc' | 'desc' = query.get('dir') === 'asc' ? 'asc' : 'desc';
  const sortField = model.fields.find((f) => f.name === sort);

  const variables: Variables = { dataModelSlug: model.slug, mode: 'latest' };
  if (conditions.length > 0) variables.filters = JSON.stringify(conditions);
  // Latest facts are ordered by observed_at only (docs/graphql.md); a field's sort is this page's.
  if (!sortField) variables.sortDirection = dir;
  variables.limit = limit;
  variables.offset = (page - 1) * limit;
  const document = factDocument('LatestFacts', variables);
  const key = JSON.stringify(variables);
  const answer = useLoad(() => runFactQuery(client, document, variables), [client, key]);

  const go = (changes: Record<string, string | undefined>) => navigate(routeWith(model, query, changes));
  const setConditions = (next: Condition[]) => go({ filters: next.length > 0 ? JSON.stringify(next) : undefined, page: undefined });

  const rows: Fact[] = answer.data ? [...answer.data.facts] : [];
  if (sortField) rows.sort((a, b) => (dir === 'asc' ? 1 : -1) * compareValues(a.data[sortField.name], b.data[sortField.name]));
  const sortTo = (name: string) => {
    const active = sort === name || (name === 'observed_at' && !sortField);
    return routeWith(model, query, { sort: name, dir: active && dir === 'desc' ? 'asc' : 'desc' });
  };
  const pk = model.fields.find((f) => f.isPrimaryKey);

  return (
    <Page
      title={`Facts of ${model.name}`}
      actions={
        <>
          <a href={href('facts')} class="muted">
            All data models
          </a>
          <a href={href('facts', model.slug, { view: 'group', filters: query.get('filters') ?? undefined })}>Group by</a>
          <ConfirmDelete
            what="data model"
            name={model.name}
            typeToConfirm={model.slug}
            after={href('facts')}
            onDelete={() => client.request('DELETE', `/data_models/${encodeURIComponent(model.id)}`)}
          >
            <p>All its facts, its fields and its dashboard widgets are deleted with it, for good. It is refused while a workflow writes to it.</p>
          </ConfirmDelete>
        </>
      }
    >
      <p class="muted">The latest fact of each entity{pk ? ` (by ${pk.name})` : ''}. Choose an entity to see its history.</p>
      <Section title="Conditions">
        <ConditionForm model={model} onAdd={(c) => setConditions([...conditions, c])} />
        {conditions.length > 0 ? (
          <ul class="fact-conditions" aria-label="Conditions in force">
            {conditions.map((c, i) => (
              <li>
                <span>{describeCondition(c)}</span>
                <button
                  type="button"
                  class="secondary"
                  aria-label={`Remove condition ${describeCondition(c)}`}
                  onClick={() => setConditions(conditions.filter((_, j) => j !== i))}
                >
                  Remove
                </button>
              </li>
            ))}
            <li>
              <button type="button" class="secondary" onClick={() => setConditions([])}>
                Clear all conditions
              </button>
            </li>
          </ul>
        ) : (
          <p class="muted small">No conditions: every entity's latest fact.</p>
        )}
      </Section>
      <ErrorNotice error={answer.error} title="The query was refused" />
      {answer.loading && !answer.data && <Loading label="Loading facts…" />}
      {answer.data && (
        <Section title="Latest facts">
          {sortField && (
            <p class="muted small" role="note">
              Sorted by {sortField.name} within this page: the API orders latest facts by observed at only.
            </p>
          )}
          {rows.length === 0 ? (
            <p class="empty muted">No entity matches.</p>
          ) : (
            <div class="table-wrap">
              <table aria-busy={answer.loading} data-testid="latest-facts">
                <caption class="visually-hidden">Latest facts of {model.name}</caption>
                <thead>
                  <tr>
                    <th scope="col">Entity</th>
                    <SortHeader title="Observed at" active={!sortField} dir={dir} to={sortTo('observed_at')} />
                    {model.fields.map((f) => (
                      <SortHeader
                        title={f.name}
                        active={sortField?.name === f.name}
                        dir={dir}
                        to={sortTo(f.name)}
                        numeric={isNumeric(f)}
                        note=" within this page"
                      />
                    ))}
                  </tr>
                </thead>
                <tbody>
                  {rows.map((r) => (
                    <tr key={r.id}>
                      <td>
                        {r.entityId === null ? (
                          <span class="muted">none</span>
                        ) : (
                          <a href={href('facts', model.slug, { entity: r.entityId })} aria-label={`History of ${r.entityId}`}>
                            {r.entityId}
                          </a>
                        )}
                      </td>
                      <FactCells model={model} fact={r} />
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )}
          <FactPager answer={answer.data} noun="entities" route={(changes) => routeWith(model, query, changes)} />
        </Section>
      )}
      <ShownQuery document={document} variables={variables} />
    </Page>
  );
}

/** A fact's observed_at and its fields, one cell each, in the data model's field order. */
export function FactCells(props: { model: Model; fact: Fact }) {
  return (
    <>
      <td>
        <Time value={props.fact.observedAt} />
      </td>
      {props.model.fields.map((f) => (
        <FieldCell field={f} value={props.fact.data[f.name]} />
      ))}
    </>
  );
}

export function FieldCell(props: { field: ModelField; value: unknown }) {
  const v = props.value;
  if (props.field.type === 'datetime' && typeof v === 'string' && !Number.isNaN(Date.parse(v))) {
    return (
      <td>
        <Time value={v} />
      </td>
    );
  }
  return <td class={isNumeric(props.field) ? 'num' : undefined}>{v === undefined || v === null ? <span class="muted">—</span> : showValue(v)}</td>;
}
