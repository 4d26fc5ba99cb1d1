/**
 * Connectors kept by a worker process between runs: the row with its spec's operations, and
 * (runtime.ts) its secret once opened, in memory only. An entry is used only when the claim
 * that took the run read the same version of the connector (CLAIM_CONNECTOR_VERSIONS): a
 * rotated secret, a new base URL, a spec attached or changed, a connector deleted, by this
 * process or any other, is seen by every run claimed after it committed. No notification is
 * needed, so none can be lost: the version travels with the claim the worker makes anyway.
 */
import type { Db } from '../db/connect.ts';
import { loadConnector, type ConnectorRow } from './connectors.sql.ts';
import { boundedMap } from '../bounded-map.ts';

/** Connectors kept at once; the oldest kept goes first past it. */
export const KEPT_CONNECTORS = 1000;

export interface ConnectorCache {
  /** The kept row of the connector at exactly `version`, else undefined. */
  get(workspaceId: string, id: string, version: string): ConnectorRow | undefined;
  set(workspaceId: string, row: ConnectorRow): void;
  delete(workspaceId: string, id: string): void;
  clear(): void;
  /**
   * Drops the connectors no step used since the previous call. Called periodically, so an
   * opened secret stays in memory only while its connector is in use: one deleted or left
   * idle is gone within two periods, even if no claim names it again.
   */
  forgetIdle(): void;
  size(): number;
  /** Steps served from a kept row, and reads of the database (for tests and profiles). */
  readonly counts: { kept: number; read: number };
}

export function connectorCache(max = KEPT_CONNECTORS): ConnectorCache {
  const rows = boundedMap<string, ConnectorRow>(max);
  const used = new Set<string>();
  const key = (workspaceId: string, id: string) => `${workspaceId}/${id}`;
  return {
    get(workspaceId, id, version) {
      const k = key(workspaceId, id);
      const row = rows.get(k);
      if (row === undefined || row.version !== version) return undefined;
      used.add(k);
      return row;
    },
    set(workspaceId, row) {
      const k = key(workspaceId, row.id);
      rows.set(k, row);
      used.add(k);
    },
    delete: (workspaceId, id) => rows.delete(key(workspaceId, id)),
    clear: () => rows.clear(),
    forgetIdle() {
      for (const k of [...rows.keys()]) if (!used.has(k)) rows.delete(k);
      used.clear();
    },
    size: () => rows.size,
    counts: { kept: 0, read: 0 },
  };
}

/**
 * The connector a step calls through. `claimed` is the version the run's claim read (undefined
 * when it read none, as in a test run; null in the map when the connector did not exist): the
 * kept row at that version, else a fresh read, kept for the next runs.
 */
export async function claimedConnector(
  db: Db,
  cache: ConnectorCache,
  workspaceId: string,
  id: string,
  claimed: Record<string, string> | null | undefined,
): Promise<ConnectorRow | undefined> {
  const version = claimed?.[id];
  if (version !== undefined) {
    const kept = cache.get(workspaceId, id, version);
    if (kept !== undefined) {
      cache.counts.kept++;
      return kept;
    }
  }
  cache.counts.read++;
  const row = await loadConnector(db, workspaceId, id);
  if (row === undefined) cache.delete(workspaceId, id);
  else cache.set(workspaceId, row);
  return row;
}
