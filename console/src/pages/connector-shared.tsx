/**
 * What the connector and API specification pages share: the shapes they read out of the
 * API's untyped JSON attributes (operations, last_changes, the rate-limit use), checked
 * before use.
 */
import type { ComponentChildren } from 'preact';
import type { ResourceOf, TributaryClient } from '@tributary/client';
import { href } from '../router.ts';
import { ErrorNotice, Loading, Page, type Column } from '../ui/index.tsx';

export type Connector = ResourceOf<'external_connectors'>;
export type ApiSpec = ResourceOf<'api_specs'>;

export interface Operation {
  operation_ref: string;
  method: string;
  path: string;
}

export interface LastChanges {
  changed_at: string | null;
  added: string[];
  removed: string[];
  changed: Array<{ operation_ref: string; request: boolean; response: boolean }>;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const strings = (v: unknown): string[] => (Array.isArray(v) ? v.filter((s): s is string => typeof s === 'string') : []);

/** A specification's operations, skipping anything that is not one (the attribute is JSON). */
export function operationsOf(value: unknown): Operation[] {
  if (!Array.isArray(value)) return [];
  return value.flatMap((o) =>
    isObject(o) && typeof o.operation_ref === 'string' && typeof o.method === 'string' && typeof o.path === 'string'
      ? [{ operation_ref: o.operation_ref, method: o.method, path: o.path }]
      : [],
  );
}

/** The drift report of the last update, or null when none was recorded. */
export function lastChangesOf(value: unknown): LastChanges | null {
  if (!isObject(value)) return null;
  const changed = Array.isArray(value.changed)
    ? value.changed.flatMap((c) =>
        isObject(c) && typeof c.operation_ref === 'string'
          ? [{ operation_ref: c.operation_ref, request: c.request === true, response: c.response === true }]
          : [],
      )
    : [];
  return { changed_at: typeof value.changed_at === 'string' ? value.changed_at : null, added: strings(value.added), removed: strings(value.removed), changed };
}

/** The signature schemes by the sender who signs with them, as config.signature_scheme names them. */
const SCHEME_NAMES: Record<string, string> = {
  standard_webhooks: 'Standard Webhooks',
  github: 'GitHub',
  stripe: 'Stripe',
  shopify: 'Shopify',
  slack: 'Slack',
};

/** Consecutive failed deliveries that make an inbound connector failing (src/connectors/inbound-status.ts: FAILING_AFTER). */
export const FAILING_AFTER = 3;

export const isInbound = (a: { direction?: string | null } | undefined) => a?.direction === 'inbound';

/**
 * What a connector is, in a few words: an inbound one by how deliveries are checked
 * (`inbound · hmac (GitHub)`, `inbound · api_key`), an outbound one by its driver and auth
 * (`http · oauth2`). An inbound connector's driver is never called, so it is not shown.
 */
export function connectorKind(a: { type?: string | null; direction?: string | null; auth_type?: string; config?: unknown } | undefined): string {
  if (isInbound(a)) {
    const scheme = isObject(a?.config) && typeof a.config.signature_scheme === 'string' ? a.config.signature_scheme : 'standard_webhooks';
    return a?.auth_type === 'hmac' ? `inbound · hmac (${SCHEME_NAMES[scheme] ?? scheme})` : `inbound · ${a?.auth_type ?? '—'}`;
  }
  return [a?.type, a?.auth_type].filter(Boolean).join(' · ');
}

/** The configured budget, from config.rate_limit, as the server reads it. */
export function configuredRateLimit(config: unknown): { requests: number; perSeconds: number } | undefined {
  const r = isObject(config) ? config.rate_limit : undefined;
  if (!isObject(r) || typeof r.requests !== 'number') return undefined;
  return { requests: r.requests, perSeconds: typeof r.per_seconds === 'number' ? r.per_seconds : 1 };
}

/**
 * The one place that knows where a connector's rate-limit use is read. Through request()
 * rather than the SDK's connectorRateLimit, so the page builds against an SDK without it.
 */
export async function loadRateLimit(client: TributaryClient, connectorId: string) {
  const doc = (await client.request('GET', `/external_connectors/${encodeURIComponent(connectorId)}/rate_limit`)) as { data?: { attributes?: unknown } };
  const a = isObject(doc.data?.attributes) ? doc.data.attributes : {};
  const num = (k: string) => (typeof a[k] === 'number' ? a[k] : null);
  return {
    limited: a.limited === true,
    requests: num('requests'),
    perSeconds: num('per_seconds'),
    used: num('used'),
    remaining: num('remaining'),
    resetsAt: typeof a.resets_at === 'string' ? a.resets_at : null,
  };
}

/** The summaries of a JSON document's operations by `METHOD /path`; YAML is not parsed in the browser. */
export function summariesOf(format: string | undefined, raw: string | undefined): Map<string, string> | undefined {
  if (format !== 'json' || raw === undefined) return undefined;
  const out = new Map<string, string>();
  try {
    const doc: unknown = JSON.parse(raw);
    const paths = isObject(doc) && isObject(doc.paths) ? doc.paths : {};
    for (const [path, item] of Object.entries(paths)) {
      if (!isObject(item)) continue;
      for (const [method, op] of Object.entries(item)) {
        if (isObject(op) && typeof op.summary === 'string') out.set(`${method.toUpperCase()} ${path}`, op.summary);
      }
    }
  } catch {
    return undefined;
  }
  return out;
}

/** The name of an included resource by type and id (`include=external_connector`). */
export function includedName(
  included: ReadonlyArray<{ type?: string; id?: string; attributes?: unknown }> | undefined,
  type: string,
  id: string | null | undefined,
) {
  if (!id) return undefined;
  const r = included?.find((x) => x.type === type && x.id === id);
  return isObject(r?.attributes) && typeof r.attributes.name === 'string' ? r.attributes.name : undefined;
}

/** The columns every table of specifications starts with: name (linked), title, version, operations. */
export const SPEC_COLUMNS: Column<ApiSpec>[] = [
  { title: 'Name', cell: (s) => <a href={href('api-specs', s.id)}>{s.attributes?.name ?? s.id}</a> },
  { title: 'Title', cell: (s) => s.attributes?.title ?? <span class="muted">—</span> },
  { title: 'Version', cell: (s) => s.attributes?.version ?? <span class="muted">—</span> },
  { title: 'Operations', numeric: true, cell: (s) => operationsOf(s.attributes?.operations).length },
];

/** A page whose resource has not come (yet): loading, or the API's error, and the way back. */
export function NotLoaded(props: { title: string; what: string; error: unknown; loading: boolean; back: string }) {
  return (
    <Page title={props.title}>
      <ErrorNotice error={props.error} title={`Could not load the ${props.what}`} />
      {props.loading && <Loading />}
      <p>
        <a href={href('connectors')}>{props.back}</a>
      </p>
    </Page>
  );
}

/** Label and value pairs as a description list; a missing value shows as a dash. */
export function PropList(props: { items: Array<[string, ComponentChildren]> }) {
  return <dl class="props">{props.items.map(([label, value]) => [<dt>{label}</dt>, <dd>{value ?? '—'}</dd>])}</dl>;
}
