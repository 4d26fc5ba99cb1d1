/**
 * Where the console reads a workflow's saved versions: the one place that knows the API's
 * path for them (the `workflow_version` type, filter[workflow_id]). A server without it
 * answers 404 or 400 for the type; then the console shows the current version only.
 */
import { TributaryError, type TributaryClient } from '@tributary/client';

interface VersionsDocument {
  data?: Array<{ attributes: { version: number; steps: WorkflowStep[] | null; inserted_at: string | null } }>;
  links?: { next?: string | null };
}

/** links.next as a path under /api/json/v1, which request takes. */
function nextPath(next: string | null | undefined): string | undefined {
  if (!next) return undefined;
  const url = new URL(next, location.origin);
  return `${url.pathname.replace(/^\/api\/json\/v1/, '')}${url.search}`;
}

export interface WorkflowStep {
  key: string;
  type: string;
  config: Record<string, unknown>;
}

export interface WorkflowVersion {
  version: number;
  steps: WorkflowStep[];
  /** When this version's steps were saved (null: only the workflow's current steps are known). */
  savedAt: string | null;
}

export interface Versions {
  /** Newest first. */
  versions: WorkflowVersion[];
  /** False when the server cannot list versions and only the current one is shown. */
  listed: boolean;
}

/** Every saved version of the workflow, newest first; the current one alone when the server cannot list them. */
export async function loadVersions(
  client: TributaryClient,
  workflow: { id: string; version: number; steps: WorkflowStep[]; updatedAt: string | null },
): Promise<Versions> {
  const current: WorkflowVersion = { version: workflow.version, steps: workflow.steps, savedAt: workflow.updatedAt };
  try {
    const versions: WorkflowVersion[] = [];
    // Through request, not iterate: the path is this module's to change, whatever the SDK's types know.
    let path: string | undefined = `/workflow_versions?${new URLSearchParams({ 'filter[workflow_id]': workflow.id, sort: '-version', 'page[limit]': '100' })}`;
    for (let pages = 0; path && pages < 50; pages++) {
      const doc = (await client.request('GET', path)) as VersionsDocument;
      for (const v of doc.data ?? [])
        versions.push({ version: v.attributes.version, steps: v.attributes.steps ?? [], savedAt: v.attributes.inserted_at ?? null });
      path = nextPath(doc.links?.next);
    }
    // The current version's steps are the workflow's own, whatever the list said.
    const listedCurrent = versions.find((v) => v.version === workflow.version);
    const rest = versions.filter((v) => v.version !== workflow.version);
    const head = { ...current, savedAt: listedCurrent?.savedAt ?? current.savedAt };
    return { versions: [head, ...rest].sort((a, b) => b.version - a.version), listed: true };
  } catch (error) {
    if (error instanceof TributaryError && (error.status === 404 || error.status === 400)) return { versions: [current], listed: false };
    throw error;
  }
}
