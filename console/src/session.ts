/**
 * Sign-in: a service account's client id and secret, exchanged by the SDK for a token that
 * lives only in this page's memory (never localStorage, a cookie or a URL). Reloading the
 * page signs out, by design: nothing of the account outlives the tab.
 */
import { createClient, type TributaryClient } from '@tributary/client';

export interface Session {
  client: TributaryClient;
  clientId: string;
  /** The account's name and the workspace it acts in, shown in the header. */
  accountName: string;
  workspace: { id: string; name: string };
  /** The workspace's organization, which a save names (organization_id). */
  organizationId: string;
  /** The account's own id: a webhook trigger saved from the console without one is run by it. */
  credentialId: string;
  scopes: string[];
}

interface CredentialAnswer {
  data: Array<{ id?: string; attributes?: { name?: string; scopes?: string[]; workspace_id?: string } }>;
  included?: Array<{ type: string; id: string; attributes?: { name?: string; organization_id?: string } }>;
}

/** Exchanges the credentials (the first call does) and reads the account and its workspace. */
export async function signIn(clientId: string, clientSecret: string): Promise<Session> {
  // Same origin: the console is served by the API it talks to. A 429 or 503 is retried a
  // little, but a person at the form should hear back within seconds.
  const client = createClient({ baseUrl: location.origin, clientId, clientSecret, maxAttempts: 3, maxElapsedMs: 10_000 });
  const answer = (await client.request('GET', `/credentials?filter[client_id]=${encodeURIComponent(clientId)}&include=workspace`)) as CredentialAnswer;
  const me = answer.data[0]?.attributes ?? {};
  const wsId = me.workspace_id ?? '';
  const ws = answer.included?.find((r) => r.type === 'workspace' && r.id === wsId);
  return {
    client,
    clientId,
    accountName: me.name ?? clientId,
    workspace: { id: wsId, name: ws?.attributes?.name ?? wsId },
    organizationId: ws?.attributes?.organization_id ?? '',
    credentialId: answer.data[0]?.id ?? '',
    scopes: me.scopes ?? [],
  };
}
