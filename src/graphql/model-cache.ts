/**
 * The data models a recent factQuery found for a workspace and a set of slugs, with their
 * fingerprint then. A later request plans with them and checks, in the same statement as
 * its account re-check and its facts, that the fingerprint still holds; when it does not
 * (a field added, a slug renamed), the models are loaded again and the query planned again.
 */
import type { PrefetchedModels } from '../facts/query/plan.ts';

export interface RememberedModels {
  workspaceId: string;
  /** Sorted. */
  slugs: string[];
  prefetched: PrefetchedModels;
  fingerprint: string;
}

export interface ModelCache {
  get(workspaceId: string, slugs: readonly string[]): RememberedModels | undefined;
  set(entry: RememberedModels): void;
  delete(workspaceId: string, slugs: readonly string[]): void;
}

const keyOf = (workspaceId: string, slugs: readonly string[]) => `${workspaceId}\n${[...slugs].sort().join('\n')}`;

/** Bounded: past `max` entries the oldest goes. */
export function createModelCache(max = 1000): ModelCache {
  const entries = new Map<string, RememberedModels>();
  return {
    get: (workspaceId, slugs) => entries.get(keyOf(workspaceId, slugs)),
    set(entry) {
      const key = keyOf(entry.workspaceId, entry.slugs);
      entries.delete(key);
      entries.set(key, entry);
      if (entries.size > max) entries.delete(entries.keys().next().value!);
    },
    delete: (workspaceId, slugs) => void entries.delete(keyOf(workspaceId, slugs)),
  };
}
