/**
 * Where a workflow's deliveries go: for each webhook trigger its service account and inbound
 * connector by name, the ingestion URL, and the relay: the one running inside `serve` when
 * there is one (GET /console/config.json says), else a `tributary relay` command for
 * providers that cannot send a bearer token; for each schedule its cron and next fire time.
 * Trigger tokens are shown once, at save, and kept only hashed, so the console can only show
 * where the token goes.
 */
import type { ComponentChildren } from 'preact';
import type { TributaryClient } from '@tributary/client';
import { useClient, useLoad } from '../api.ts';
import { Copyable, Empty, Time } from '../ui/index.tsx';

export interface TriggerView {
  id: string;
  key: string;
  type: string;
  service_account_id?: string;
  inbound_connector_id?: string | null;
  accept?: string;
  cron?: string;
  timezone?: string;
  catch_up?: string;
  next_fire_at?: string | null;
}

const TOKEN = '<token>';

/** The process's own facts for the console (src/console/surface.ts): null when unknown. */
export interface ConsoleConfig {
  relay: { url: string } | null;
}

async function loadConsoleConfig(): Promise<ConsoleConfig | null> {
  try {
    const res = await fetch(`${location.origin}/console/config.json`, { headers: { accept: 'application/json' } });
    return res.ok ? ((await res.json()) as ConsoleConfig) : null;
  } catch {
    return null;
  }
}

interface Named {
  name: string;
  detail?: string;
}
type Names = Map<string, Named>;

interface ListDoc {
  data?: Array<{ id: string; attributes?: { name?: string; auth_type?: string } }>;
}

/**
 * The names of the triggers' accounts and connectors: one list call for each (a workspace
 * holds few), then a read of each id the first page did not hold. An id the caller cannot
 * read keeps showing as the id alone.
 */
async function loadNames(client: TributaryClient, triggers: TriggerView[]): Promise<Names> {
  const names: Names = new Map();
  const remember = (doc: ListDoc) => {
    for (const r of doc.data ?? [])
      names.set(r.id, { name: r.attributes?.name ?? r.id, ...(r.attributes?.auth_type ? { detail: r.attributes.auth_type } : {}) });
  };
  const accounts = [...new Set(triggers.map((t) => t.service_account_id).filter((x): x is string => !!x))];
  const connectors = [...new Set(triggers.map((t) => t.inbound_connector_id).filter((x): x is string => !!x))];
  const read = async (path: string) => {
    try {
      remember((await client.request('GET', path)) as ListDoc);
    } catch {
      // Not visible to this account (or gone): the id stays as it is.
    }
  };
  await Promise.all([
    accounts.length > 0 && read('/credentials?fields[credential]=name&sort=name&page[limit]=250'),
    connectors.length > 0 && read('/external_connectors?filter[direction]=inbound&fields[external_connector]=name,auth_type&sort=name&page[limit]=250'),
  ]);
  const one = async (path: string) => {
    try {
      const doc = (await client.request('GET', path)) as { data?: NonNullable<ListDoc['data']>[number] };
      if (doc.data) remember({ data: [doc.data] });
    } catch {
      // As above.
    }
  };
  await Promise.all([
    ...accounts.filter((id) => !names.has(id)).map((id) => one(`/credentials/${encodeURIComponent(id)}?fields[credential]=name`)),
    ...connectors.filter((id) => !names.has(id)).map((id) => one(`/external_connectors/${encodeURIComponent(id)}?fields[external_connector]=name,auth_type`)),
  ]);
  return names;
}

/** A name with its id as secondary text (and on hover); the id alone while names load or when unknown. */
function NameAndId(props: { id: string; named: Named | undefined }) {
  if (!props.named) return <span class="mono">{props.id}</span>;
  return (
    <span title={props.id}>
      {props.named.name}
      {props.named.detail && <span class="muted"> ({props.named.detail})</span>} <span class="muted small mono">{props.id}</span>
    </span>
  );
}

function relayCommand(origin: string): string {
  return [`RELAY_TARGET_URL=${origin} \\`, `RELAY_CREDENTIALS_FILE=./relay-credentials.json \\`, `RELAY_PORT=8081 \\`, `npx tributary relay`].join('\n');
}

function TriggerCard(props: { trigger: TriggerView; children: ComponentChildren }) {
  const t = props.trigger;
  return (
    <article class="wf-trigger-card" aria-labelledby={`trigger-${t.id}`}>
      <h3 id={`trigger-${t.id}`}>
        {t.key} <span class="muted small">{t.type}</span>
      </h3>
      {props.children}
    </article>
  );
}

function RelaySuggestion(props: { trigger: TriggerView; origin: string }) {
  const t = props.trigger;
  return (
    <>
      <p class="small">
        For a provider that cannot send a bearer token (Stripe, GitHub, Shopify…), run the relay as this trigger's service account and paste{' '}
        <code>https://&lt;relay host&gt;/hooks/{TOKEN}</code> into the provider's dashboard. The relay reads the account's <code>client_id</code> and{' '}
        <code>client_secret</code> from the file (or from <code>RELAY_CLIENT_ID</code> and <code>RELAY_CLIENT_SECRET</code>), never from flags.
      </p>
      <Copyable text={relayCommand(props.origin)} label={`Relay command for ${t.key}`} />
    </>
  );
}

function RunningRelay(props: { trigger: TriggerView; url: string }) {
  const t = props.trigger;
  return (
    <>
      <p class="small">
        For a provider that cannot send a bearer token (Stripe, GitHub, Shopify…), this server runs a relay. Paste this into the provider's dashboard, with the
        trigger's token in place of <code>{TOKEN}</code>:
      </p>
      <Copyable text={`${props.url}/hooks/${TOKEN}`} label={`Relay URL of ${t.key}`} />
      <p class="small muted">
        The relay delivers as its own service account: the one of <code>RELAY_CLIENT_ID</code> or <code>RELAY_CREDENTIALS_FILE</code>, else the bootstrap
        account. This trigger must select that account. A provider on the internet needs the public https address that reaches this relay.
      </p>
    </>
  );
}

function Webhook(props: { trigger: TriggerView; origin: string; names: Names | undefined; relay: ConsoleConfig['relay'] | undefined }) {
  const t = props.trigger;
  return (
    <TriggerCard trigger={t}>
      <dl class="props">
        <dt>Service account</dt>
        <dd data-testid="trigger-account">
          {t.service_account_id ? <NameAndId id={t.service_account_id} named={props.names?.get(t.service_account_id)} /> : '—'}
        </dd>
        <dt>Inbound connector</dt>
        <dd data-testid="trigger-connector">
          {t.inbound_connector_id ? (
            <NameAndId id={t.inbound_connector_id} named={props.names?.get(t.inbound_connector_id)} />
          ) : (
            <span class="muted">none: a bearer token alone delivers</span>
          )}
        </dd>
        <dt>Bodies</dt>
        <dd>{t.accept === 'form' ? 'JSON and form posts (accept: form)' : 'JSON (accept: json)'}</dd>
      </dl>
      <p class="small">Deliver with the service account's bearer token to:</p>
      <Copyable text={`${props.origin}/api/v1/webhooks/${TOKEN}`} label={`Ingestion URL of ${t.key}`} />
      {props.relay === undefined ? null : props.relay ? (
        <RunningRelay trigger={t} url={props.relay.url} />
      ) : (
        <RelaySuggestion trigger={t} origin={props.origin} />
      )}
      {!t.inbound_connector_id && (
        <p class="notice info small">
          Through the relay this trigger answers 401: the relay asks for verification, and only a trigger with an <code>hmac</code> or <code>api_key</code>{' '}
          inbound connector has one.
        </p>
      )}
    </TriggerCard>
  );
}

function Schedule(props: { trigger: TriggerView }) {
  const t = props.trigger;
  return (
    <TriggerCard trigger={t}>
      <dl class="props">
        <dt>Cron</dt>
        <dd class="mono">{t.cron}</dd>
        <dt>Time zone</dt>
        <dd>{t.timezone ?? 'UTC'}</dd>
        <dt>Missed ticks</dt>
        <dd>{t.catch_up === 'none' ? 'none are run' : 'the latest one runs'}</dd>
        <dt>Next fire</dt>
        <dd>{t.next_fire_at ? <Time value={t.next_fire_at} /> : <span class="muted">not while the workflow is inactive</span>}</dd>
      </dl>
    </TriggerCard>
  );
}

export function Triggers(props: { triggers: TriggerView[] }) {
  const client = useClient();
  const origin = location.origin;
  const webhooks = props.triggers.filter((t) => t.type === 'webhook');
  const ids = webhooks.map((t) => `${t.service_account_id}/${t.inbound_connector_id}`).join(',');
  const names = useLoad(() => loadNames(client, webhooks), [client, ids]);
  // undefined while it loads (neither relay text yet), null: unknown, so the command is suggested.
  const config = useLoad(() => loadConsoleConfig(), []);
  const relay = config.loading && !config.data ? undefined : (config.data?.relay ?? null);
  if (props.triggers.length === 0) return <Empty>No triggers: this workflow runs only on test runs and replays.</Empty>;
  return (
    <div>
      {webhooks.length > 0 && (
        <p class="notice info">
          A trigger's token is shown only once, in the answer of the save that made the trigger. It is stored hashed, so nobody can show it again:{' '}
          <code>{TOKEN}</code> below stands for it. Lost it? Save the workflow with the trigger left out and added again (a new trigger gets a new token).
        </p>
      )}
      <div class="wf-triggers">
        {props.triggers.map((t) =>
          t.type === 'schedule' ? <Schedule trigger={t} /> : <Webhook trigger={t} origin={origin} names={names.data} relay={relay} />,
        )}
      </div>
    </div>
  );
}
