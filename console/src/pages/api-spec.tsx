/**
 * One API specification: what was read from the document (servers, security schemes,
 * operations, with a filter) and what its last update changed in the operations.
 */
import { useMemo, useState } from 'preact/hooks';
import { useClient, useLoad } from '../api.ts';
import { currentRoute, href, navigate } from '../router.ts';
import { Field, Page, Section, Table, Time } from '../ui/index.tsx';
import { ConfirmDelete } from '../ui/confirm-delete.tsx';
import { includedName, lastChangesOf, NotLoaded, PropList, operationsOf, summariesOf, type LastChanges, type Operation } from './connector-shared.tsx';

export function ApiSpecPage(props: { id: string }) {
  const client = useClient();
  const loaded = useLoad(
    () => client.get('api_specs', props.id, { include: 'external_connector', fields: { external_connector: ['name'] } }),
    [client, props.id],
  );
  const spec = loaded.data?.data;
  if (!spec)
    return (
      <NotLoaded what="API specification" title="API specification" error={loaded.error} loading={loaded.loading} back="All connectors and specifications" />
    );
  const a = spec.attributes ?? {};
  const connectorId = a.external_connector_id;
  return (
    <Page
      title={a.name ?? 'API specification'}
      actions={
        <>
          <a href={href('connectors')}>All connectors and specifications</a>
          <ConfirmDelete
            what="API specification"
            name={a.name ?? props.id}
            after={href('connectors')}
            onDelete={() => client.request('DELETE', `/api_specs/${encodeURIComponent(props.id)}`)}
          >
            <p>It is refused while it is the last specification of a connector whose operations a workflow calls.</p>
          </ConfirmDelete>
        </>
      }
    >
      <div class="grid-2">
        <Section title="Specification">
          <PropList
            items={[
              ['Title', a.title],
              ['Version', a.version],
              ['OpenAPI', `${a.openapi_version ?? '—'} (${a.format ?? '?'})`],
              ['Provider', a.provider_slug],
              [
                'Connector',
                connectorId ? (
                  <a href={href('connectors', connectorId)}>{includedName(loaded.data?.included, 'external_connector', connectorId) ?? connectorId}</a>
                ) : (
                  'not attached'
                ),
              ],
              ['Updated', <Time value={a.updated_at} />],
            ]}
          />
        </Section>
        <div>
          <Section title="Servers">
            <Servers value={a.servers} />
          </Section>
          <Section title="Security schemes">
            <SecuritySchemes value={a.security_schemes} />
          </Section>
        </div>
      </div>
      <Drift changes={lastChangesOf((a as Record<string, unknown>).last_changes)} />
      <Operations operations={operationsOf(a.operations)} summaries={summariesOf(a.format, a.raw_document)} specId={props.id} />
    </Page>
  );
}

function Servers(props: { value: unknown }) {
  const servers = Array.isArray(props.value) ? (props.value as Array<{ url?: unknown; description?: unknown }>) : [];
  if (servers.length === 0) return <p class="muted">No server: the connector's base_url says where calls go.</p>;
  return (
    <ul class="plain">
      {servers.map((s) => (
        <li>
          <span class="mono">{String(s.url)}</span>
          {typeof s.description === 'string' && <span class="muted"> — {s.description}</span>}
        </li>
      ))}
    </ul>
  );
}

/** A scheme in a few words: `http basic`, `apiKey in header X-Api-Key`, `oauth2 clientCredentials`. */
function describeScheme(s: Record<string, unknown>): string {
  if (s.type === 'http') return `scheme ${String(s.scheme ?? '')}${s.bearerFormat ? ` (${String(s.bearerFormat)})` : ''}`;
  if (s.type === 'apiKey') return `${String(s.name ?? '')} in ${String(s.in ?? '')}`;
  if (s.type === 'oauth2' && typeof s.flows === 'object' && s.flows !== null) return `flows: ${Object.keys(s.flows).join(', ')}`;
  if (s.type === 'openIdConnect') return String(s.openIdConnectUrl ?? '');
  return '';
}

function SecuritySchemes(props: { value: unknown }) {
  const entries = typeof props.value === 'object' && props.value !== null ? Object.entries(props.value as Record<string, unknown>) : [];
  const rows = entries.map(([name, s]) => ({ name, scheme: (typeof s === 'object' && s !== null ? s : {}) as Record<string, unknown> }));
  return (
    <Table
      caption="Security schemes"
      rowKey={(r) => r.name}
      rows={rows}
      empty="The document declares no security scheme."
      columns={[
        { title: 'Name', cell: (r) => <span class="mono">{r.name}</span> },
        { title: 'Type', cell: (r) => String(r.scheme.type ?? '—') },
        { title: 'Details', cell: (r) => describeScheme(r.scheme) || <span class="muted">—</span> },
      ]}
    />
  );
}

function Drift(props: { changes: LastChanges | null }) {
  const c = props.changes;
  const rows = c
    ? [
        ...c.added.map((ref) => ({ kind: 'added', ref, what: 'new operation' })),
        ...c.removed.map((ref) => ({ kind: 'removed', ref, what: 'no longer in the document; steps naming it fail' })),
        ...c.changed.map((x) => ({
          kind: 'changed',
          ref: x.operation_ref,
          what: [x.request && 'request schema', x.response && 'response schema'].filter(Boolean).join(' and ') + ' changed',
        })),
      ]
    : [];
  return (
    <Section title="Last change">
      {!c ? (
        <p class="muted">No change recorded. An update whose document adds, removes or changes operations is reported here.</p>
      ) : (
        <>
          <p>
            <Time value={c.changed_at} />: {c.added.length} added, {c.removed.length} removed, {c.changed.length} changed.
          </p>
          <Table
            caption="Operations changed by the last update"
            rowKey={(r) => `${r.kind} ${r.ref}`}
            rows={rows}
            columns={[
              { title: 'Change', cell: (r) => <span class={`drift drift-${r.kind}`}>{r.kind}</span> },
              { title: 'Operation', cell: (r) => <span class="mono">{r.ref}</span> },
              { title: 'What', cell: (r) => r.what },
            ]}
          />
        </>
      )}
    </Section>
  );
}

function Operations(props: { operations: Operation[]; summaries: Map<string, string> | undefined; specId: string }) {
  const [text, setText] = useState(() => currentRoute().query.get('q') ?? '');
  const summary = (o: Operation) => props.summaries?.get(`${o.method.toUpperCase()} ${o.path}`);
  const shown = useMemo(() => {
    const words = text.toLowerCase().split(/\s+/).filter(Boolean);
    if (words.length === 0) return props.operations;
    return props.operations.filter((o) => {
      const hay = `${o.method} ${o.path} ${o.operation_ref} ${summary(o) ?? ''}`.toLowerCase();
      return words.every((w) => hay.includes(w));
    });
  }, [text, props.operations, props.summaries]);
  const onInput = (e: Event) => {
    const value = (e.currentTarget as HTMLInputElement).value;
    setText(value);
    // The filter is kept in the address, to share or reload, without a new history entry per key.
    navigate(href('api-specs', props.specId, { q: value }), { replace: true });
  };
  return (
    <Section title="Operations">
      <div class="filters">
        <Field label="Filter operations" hint="Words to find in the method, path, operation id or summary">
          <input type="search" value={text} onInput={onInput} spellcheck={false} />
        </Field>
      </div>
      <p class="muted small" role="status">
        {shown.length === props.operations.length ? `${props.operations.length} operations` : `${shown.length} of ${props.operations.length} operations`}
      </p>
      <Table
        caption="Operations"
        rowKey={(o) => o.operation_ref}
        rows={shown}
        empty={props.operations.length === 0 ? 'The document has no operation.' : 'No operation matches the filter.'}
        columns={[
          { title: 'Method', cell: (o) => <span class="method">{o.method.toUpperCase()}</span> },
          { title: 'Path', cell: (o) => <span class="mono">{o.path}</span> },
          {
            title: 'Operation id',
            cell: (o) =>
              o.operation_ref === `${o.method.toUpperCase()} ${o.path}` ? <span class="muted">none</span> : <span class="mono">{o.operation_ref}</span>,
          },
          { title: 'Summary', cell: (o) => summary(o) ?? <span class="muted">—</span> },
        ]}
      />
      {props.summaries === undefined && <p class="muted small">Summaries are shown for JSON documents only.</p>}
    </Section>
  );
}
