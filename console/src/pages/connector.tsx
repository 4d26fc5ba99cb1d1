/**
 * One connector: what it is, its configuration (the API never returns the secret, only
 * whether one is stored), its status with a Verify button, the specifications attached to
 * it and how much of its rate budget the current window has used. An inbound connector
 * shows its scheme and the status its deliveries gave it: no Verify, no rate limit, no
 * specification (it is never called).
 */
import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import { useClient, useLoad } from '../api.ts';
import { href } from '../router.ts';
import { ActionButton, Badge, ErrorNotice, Page, Section, Time } from '../ui/index.tsx';
import { PagedList } from '../ui/paged-list.tsx';
import { ConfirmDelete } from '../ui/confirm-delete.tsx';
import {
  configuredRateLimit,
  connectorKind,
  FAILING_AFTER,
  isInbound,
  loadRateLimit,
  NotLoaded,
  PropList,
  SPEC_COLUMNS,
  type Connector,
} from './connector-shared.tsx';

export function ConnectorPage(props: { id: string }) {
  const client = useClient();
  const loaded = useLoad(() => client.get('external_connectors', props.id), [client, props.id]);
  // The answer of Verify replaces what was loaded: it is the connector as it is now.
  const [verified, setVerified] = useState<{ id: string; connector: Connector } | undefined>(undefined);
  const connector = verified?.id === props.id ? verified.connector : loaded.data?.data;

  if (!connector) return <NotLoaded what="connector" title="Connector" error={loaded.error} loading={loaded.loading} back="All connectors" />;
  const a = connector.attributes ?? {};
  const verify = async () => {
    const answer = await client.verifyConnector(props.id);
    setVerified({ id: props.id, connector: answer.data });
  };
  const inbound = isInbound(a);
  const actions = (
    <>
      <a href={href('connectors')}>All connectors</a>
      <ConfirmDelete
        what="connector"
        name={a.name ?? props.id}
        after={href('connectors')}
        onDelete={() => client.request('DELETE', `/external_connectors/${encodeURIComponent(props.id)}`)}
      >
        <p>Its stored secret goes with it. Its API specifications stay, detached. It is refused while a workflow uses it.</p>
      </ConfirmDelete>
    </>
  );
  const details = (
    <Section title="Connector">
      <PropList
        items={[
          ['Kind', connectorKind(a)],
          // An inbound connector's driver is never used: its type would only mislead.
          ...(inbound ? [] : ([['Type', a.type]] as Array<[string, ComponentChildren]>)),
          ['Direction', a.direction],
          ['Provider', a.provider_slug],
          ['Auth type', a.auth_type],
          ['Secret stored', a.has_secret ? 'yes' : 'no'],
          ['Description', a.description],
          ['Created', <Time value={a.inserted_at} />],
          ['Updated', <Time value={a.updated_at} />],
          ['Id', <span class="mono">{connector.id}</span>],
        ]}
      />
    </Section>
  );
  const configuration = (
    <Section title="Configuration">
      <ConfigList config={a.config} />
      <p class="muted small">The secret is write-only: it is never returned, so it is never shown.</p>
    </Section>
  );
  // An inbound connector is never called: its deliveries verify it, and it has no rate budget or specification.
  if (inbound) {
    return (
      <Page title={a.name ?? 'Connector'} actions={actions}>
        <div class="grid-2">
          <Section title="Status">
            <PropList
              items={[
                ['Status', <Badge value={a.status} />],
                // When it became verified: while verified, it has been since then.
                [a.status === 'verified' ? 'Verified since' : 'Last verified', <Time value={a.last_verified_at} />],
              ]}
            />
            {a.status === 'failing' && a.last_error && (
              <div class="notice error">
                <strong>The last deliveries failed their check</strong>
                <p class="conn-error">{a.last_error}</p>
              </div>
            )}
            <p class="muted small">
              Its deliveries verify it: it becomes verified when a delivery passes its check, and failing after {FAILING_AFTER} in a row fail it.
            </p>
          </Section>
          {details}
        </div>
        {configuration}
      </Page>
    );
  }
  return (
    <Page title={a.name ?? 'Connector'} actions={actions}>
      <div class="grid-2">
        <Section title="Status">
          <PropList
            items={[
              ['Status', <Badge value={a.status} />],
              ['Last verified', <Time value={a.last_verified_at} />],
            ]}
          />
          <div role="status" class="verify-outcome">
            {verified?.id === props.id && a.status === 'verified' && (
              <p class="notice ok">
                Verified just now: <Time value={a.last_verified_at} />.
              </p>
            )}
          </div>
          {a.status === 'failing' && a.last_error && (
            <div class="notice error" role={verified?.id === props.id ? 'alert' : undefined}>
              <strong>{verified?.id === props.id ? 'Verification failed' : 'The last verification failed'}</strong>
              <p class="conn-error">{a.last_error}</p>
            </div>
          )}
          <div class="verify-row">
            <ActionButton label="Verify" busyLabel="Verifying…" onRun={verify} />
            <span class="muted small">Makes one cheap call to the provider and records the outcome.</span>
          </div>
        </Section>
        <RateLimit connectorId={props.id} config={a.config} />
      </div>

      <div class="grid-2">
        {details}
        {configuration}
      </div>

      <AttachedSpecs connectorId={props.id} />
    </Page>
  );
}

function ConfigList(props: { config: unknown }) {
  const c = props.config;
  if (typeof c !== 'object' || c === null || Object.keys(c).length === 0) return <p class="muted">No configuration.</p>;
  return (
    <dl class="props">
      {Object.entries(c as Record<string, unknown>).map(([k, v]) => [
        <dt class="mono">{k}</dt>,
        <dd class={typeof v === 'string' ? 'mono conn-value' : 'mono'}>{typeof v === 'string' ? v : JSON.stringify(v)}</dd>,
      ])}
    </dl>
  );
}

function AttachedSpecs(props: { connectorId: string }) {
  const client = useClient();
  return (
    <Section title="API specification">
      <PagedList
        load={() =>
          client.list('api_specs', {
            filter: { external_connector_id: props.connectorId },
            sort: '-updated_at',
            fields: { api_spec: ['name', 'title', 'version', 'operations', 'updated_at'] },
          })
        }
        deps={[client, props.connectorId]}
        errorTitle="Could not list the attached specifications"
        caption="Attached API specifications"
        pagerLabel="Attached specification pages"
        empty="No specification is attached: steps cannot name operations. Attach one with its external_connector_id."
        columns={[...SPEC_COLUMNS, { title: 'Updated', cell: (s) => <Time value={s.attributes?.updated_at} /> }]}
        after={(page) => page.data.length > 1 && <p class="muted small">Steps use the specification changed last (the first one here).</p>}
      />
    </Section>
  );
}

const UNITS: Array<[number, string]> = [
  [86_400, 'day'],
  [3600, 'hour'],
  [60, 'minute'],
  [1, 'second'],
];

/** A window's length as a person says it: `second`, `5 minutes`, `90 seconds`. */
function windowWords(seconds: number): string {
  const [size, unit] = UNITS.find(([n]) => seconds % n === 0) ?? [1, 'second'];
  const n = seconds / size;
  return n === 1 ? unit : `${n} ${unit}s`;
}

function RateLimit(props: { connectorId: string; config: unknown }) {
  const client = useClient();
  const configured = configuredRateLimit(props.config);
  const use = useLoad(() => loadRateLimit(client, props.connectorId), [client, props.connectorId]);
  const u = use.data;
  const refresh = (
    <button type="button" class="secondary" onClick={use.reload} disabled={use.loading}>
      Refresh
    </button>
  );
  if (!configured && (!u || !u.limited)) {
    return (
      <Section title="Rate limit">
        <p>
          No rate limit: calls go out as fast as steps make them. Set <code>config.rate_limit</code> (<code>{'{"requests": 10, "per_seconds": 1}'}</code>) to
          cap them.
        </p>
        <ErrorNotice error={use.error} title="Could not read the rate-limit use" />
      </Section>
    );
  }
  const requests = u?.requests ?? configured?.requests ?? 0;
  const per = u?.perSeconds ?? configured?.perSeconds ?? 1;
  return (
    <Section title="Rate limit" actions={refresh}>
      <p>
        At most <strong>{requests}</strong> {requests === 1 ? 'call' : 'calls'} every <strong>{windowWords(per)}</strong>, across every worker.
      </p>
      <ErrorNotice error={use.error} title="Could not read the rate-limit use" />
      {u && u.used !== null && (
        <div class="rate-use">
          <meter id="rate-meter" min={0} max={Math.max(requests, 1)} value={Math.min(u.used, requests)} aria-label="Calls used in this window" />
          <dl class="props">
            <dt>Used in this window</dt>
            <dd>
              {u.used} of {requests}
            </dd>
            <dt>Remaining</dt>
            <dd>{u.remaining ?? '—'}</dd>
            <dt>Frees up</dt>
            <dd>
              <Time value={u.resetsAt} />
            </dd>
          </dl>
        </div>
      )}
    </Section>
  );
}
