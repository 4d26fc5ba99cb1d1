/**
 * The workspace's connectors (their status first: which ones fail and why; which way they
 * face, and what they are: `inbound · hmac (GitHub)`, `http · api_key`) and the API
 * specifications uploaded to it, each linking to its page.
 */
import { useClient } from '../api.ts';
import { href, navigate, useRoute } from '../router.ts';
import { Badge, Field, Page, Section, Time } from '../ui/index.tsx';
import { PagedList } from '../ui/paged-list.tsx';
import { connectorKind, includedName, SPEC_COLUMNS } from './connector-shared.tsx';

const STATUSES = ['unverified', 'verified', 'failing'] as const;

export function ConnectorsPage() {
  const route = useRoute();
  const status = route.query.get('status') ?? '';
  return (
    <Page title="Connectors">
      <ConnectorList status={STATUSES.find((s) => s === status)} />
      <SpecList />
    </Page>
  );
}

function ConnectorList(props: { status: (typeof STATUSES)[number] | undefined }) {
  const client = useClient();
  const filter = (
    <div class="filters">
      <Field label="Status">
        <select
          value={props.status ?? ''}
          onChange={(e) => navigate(href('connectors', { status: (e.currentTarget as HTMLSelectElement).value }), { replace: true })}
        >
          <option value="">Any</option>
          {STATUSES.map((s) => (
            <option value={s}>{s}</option>
          ))}
        </select>
      </Field>
    </div>
  );
  return (
    <Section title="External connectors" actions={filter}>
      <PagedList
        load={() =>
          client.list('external_connectors', {
            sort: 'name',
            page: { limit: 50 },
            ...(props.status ? { filter: { status: props.status } } : {}),
            fields: { external_connector: ['name', 'type', 'direction', 'provider_slug', 'auth_type', 'config', 'status', 'last_verified_at', 'last_error'] },
          })
        }
        deps={[client, props.status]}
        errorTitle="Could not list the connectors"
        caption="External connectors"
        pagerLabel="Connector pages"
        empty={props.status ? `No ${props.status} connector.` : 'No connector yet. Create one with the API or `tributary connector create`.'}
        columns={[
          { title: 'Name', cell: (c) => <a href={href('connectors', c.id)}>{c.attributes?.name ?? c.id}</a> },
          { title: 'Provider', cell: (c) => c.attributes?.provider_slug ?? <span class="muted">—</span> },
          { title: 'Direction', cell: (c) => c.attributes?.direction ?? <span class="muted">—</span> },
          { title: 'Kind', cell: (c) => connectorKind(c.attributes) },
          { title: 'Status', cell: (c) => <Badge value={c.attributes?.status} /> },
          { title: 'Last verified', cell: (c) => <Time value={c.attributes?.last_verified_at} /> },
          {
            title: 'Last error',
            cell: (c) => (c.attributes?.last_error ? <span class="conn-error small">{c.attributes.last_error}</span> : <span class="muted">—</span>),
          },
        ]}
      />
    </Section>
  );
}

function SpecList() {
  const client = useClient();
  return (
    <Section title="API specifications">
      <PagedList
        load={() =>
          client.list('api_specs', {
            sort: 'name',
            page: { limit: 50 },
            include: 'external_connector',
            // The operations come along only to be counted; the document itself stays on the server.
            fields: { api_spec: ['name', 'title', 'version', 'operations', 'external_connector_id'], external_connector: ['name'] },
          })
        }
        deps={[client]}
        errorTitle="Could not list the API specifications"
        caption="API specifications"
        pagerLabel="API specification pages"
        empty={
          <>
            No API specification yet. Upload one with the API or <code>tributary api-spec import</code>.
          </>
        }
        columns={(page) => [
          ...SPEC_COLUMNS,
          {
            title: 'Connector',
            cell: (s) => {
              const id = s.attributes?.external_connector_id;
              if (!id) return <span class="muted">not attached</span>;
              return <a href={href('connectors', id)}>{includedName(page.included, 'external_connector', id) ?? id}</a>;
            },
          },
        ]}
      />
    </Section>
  );
}
