/**
 * Facts: pick a data model (`#/facts`), read its latest facts (`#/facts/MODEL`), one
 * entity's history (`#/facts/MODEL?entity=ID`) through GraphQL factQuery, or its groups
 * (`#/facts/MODEL?view=group&groupBy=...`) through factAggregate: the way a user's own
 * client reads them; each view shows the query it sent.
 */
import { useClient, useLoad } from '../api.ts';
import { href } from '../router.ts';
import { Empty, ErrorNotice, Loading, Page, Table } from '../ui/index.tsx';
import { loadModel, loadModels, type Model } from './facts-query.tsx';
import { LatestView } from './facts-latest.tsx';
import { TimelineView } from './facts-timeline.tsx';
import { GroupView } from './facts-group.tsx';

function ModelPicker() {
  const client = useClient();
  const models = useLoad(() => loadModels(client), [client]);
  return (
    <Page title="Facts">
      <p class="muted">Pick a data model to read its facts: the latest per entity, or one entity's history.</p>
      <ErrorNotice error={models.error} title="Could not load the data models" />
      {models.loading && !models.data && <Loading label="Loading data models…" />}
      {models.data && (
        <Table<Model>
          caption="Data models"
          rows={models.data}
          rowKey={(m) => m.id}
          empty="This workspace has no data models yet."
          columns={[
            { title: 'Data model', cell: (m) => <a href={href('facts', m.slug)}>{m.name}</a> },
            { title: 'Slug', cell: (m) => <code>{m.slug}</code> },
            { title: 'Fields', cell: (m) => m.fields.map((f) => f.name).join(', ') || <span class="muted">none</span> },
          ]}
        />
      )}
    </Page>
  );
}

export function FactsPage(props: { model: string | undefined; query: URLSearchParams }) {
  const client = useClient();
  const slug = props.model;
  const model = useLoad(() => (slug ? loadModel(client, slug) : Promise.resolve(null)), [client, slug]);
  if (!slug) return <ModelPicker />;
  if (model.error) {
    return (
      <Page title={`Facts of ${slug}`}>
        <ErrorNotice error={model.error} title="Could not load the data model" />
      </Page>
    );
  }
  if (!model.data || model.data.slug !== slug) {
    if (model.loading) return <Loading label="Loading the data model…" />;
    return (
      <Page title="Data model not found">
        <Empty>
          This workspace has no data model <code>{slug}</code>. <a href={href('facts')}>See its data models.</a>
        </Empty>
      </Page>
    );
  }
  const entity = props.query.get('entity');
  if (props.query.get('view') === 'group') return <GroupView model={model.data} query={props.query} />;
  return entity !== null ? <TimelineView model={model.data} entity={entity} query={props.query} /> : <LatestView model={model.data} query={props.query} />;
}
