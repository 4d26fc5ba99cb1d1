/**
 * Where a workflow's deliveries go: for each webhook trigger the ingestion URL and a
 * `tributary relay` command for providers that cannot send a bearer token; for each schedule
 * its cron and next fire time. Trigger tokens are shown once, at save, and kept only hashed,
 * so the console can only show where the token goes.
 */
import type { ComponentChildren } from 'preact';
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

function Webhook(props: { trigger: TriggerView; origin: string }) {
  const t = props.trigger;
  return (
    <TriggerCard trigger={t}>
      <dl class="props">
        <dt>Service account</dt>
        <dd class="mono">{t.service_account_id ?? '—'}</dd>
        <dt>Inbound connector</dt>
        <dd>{t.inbound_connector_id ? <span class="mono">{t.inbound_connector_id}</span> : <span class="muted">none: a bearer token alone delivers</span>}</dd>
        <dt>Bodies</dt>
        <dd>{t.accept === 'form' ? 'JSON and form posts (accept: form)' : 'JSON (accept: json)'}</dd>
      </dl>
      <p class="small">Deliver with the service account's bearer token to:</p>
      <Copyable text={`${props.origin}/api/v1/webhooks/${TOKEN}`} label={`Ingestion URL of ${t.key}`} />
      <p class="small">
        For a provider that cannot send a bearer token (Stripe, GitHub, Shopify…), run the relay as this trigger's service account and paste{' '}
        <code>https://&lt;relay host&gt;/hooks/{TOKEN}</code> into the provider's dashboard. The relay reads the account's <code>client_id</code> and{' '}
        <code>client_secret</code> from the file (or from <code>RELAY_CLIENT_ID</code> and <code>RELAY_CLIENT_SECRET</code>), never from flags.
      </p>
      <Copyable text={relayCommand(props.origin)} label={`Relay command for ${t.key}`} />
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
  const origin = location.origin;
  if (props.triggers.length === 0) return <Empty>No triggers: this workflow runs only on test runs and replays.</Empty>;
  const hasWebhook = props.triggers.some((t) => t.type === 'webhook');
  return (
    <div>
      {hasWebhook && (
        <p class="notice info">
          A trigger's token is shown only once, in the answer of the save that made the trigger. It is stored hashed, so nobody can show it again:{' '}
          <code>{TOKEN}</code> below stands for it. Lost it? Save the workflow with the trigger left out and added again (a new trigger gets a new token).
        </p>
      )}
      <div class="wf-triggers">{props.triggers.map((t) => (t.type === 'schedule' ? <Schedule trigger={t} /> : <Webhook trigger={t} origin={origin} />))}</div>
    </div>
  );
}
