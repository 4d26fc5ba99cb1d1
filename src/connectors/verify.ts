/**
 * Verifying a connector: one cheap call through its driver (http: the configured
 * health_operation of its specification, else GET of the base URL; s3: HeadBucket;
 * snowflake: SELECT 1). The connector becomes `verified` or `failing`, with the time and,
 * when failing, why (never a secret: the texts are built here, not copied from answers).
 */
import type { Db } from '../db/connect.ts';
import { loadConnector, recordVerification } from './connectors.sql.ts';
import { ConnectorConfigError, EgressRefused, networkFailure, ProviderUnavailable, RequestProblem } from './errors.ts';
import { operationOf } from './operations.ts';
import { callHttp, type ConnectorRuntime } from './runtime.ts';
import { probeDriver } from './drivers.ts';

export interface VerifyResult {
  ok: boolean;
  error: string | null;
}

function describe(err: unknown): string {
  if (err instanceof ConnectorConfigError || err instanceof EgressRefused || err instanceof ProviderUnavailable || err instanceof RequestProblem) return err.message;
  const code = (err as { code?: unknown }).code;
  return networkFailure(err)?.message ?? (typeof code === 'string' ? `The probe failed (${code})` : 'The probe failed');
}

export async function probe(rt: ConnectorRuntime, db: Db, workspaceId: string, id: string): Promise<VerifyResult | undefined> {
  const row = await loadConnector(db, workspaceId, id);
  if (!row) return undefined;
  try {
    if (row.type === 's3' || row.type === 'snowflake') {
      await probeDriver(rt, row);
      return { ok: true, error: null };
    }
    const health = typeof row.config?.health_operation === 'string' ? operationOf(row.operations, row.config.health_operation) : undefined;
    const res = await callHttp(rt, row, health ? { method: health.method, path: health.path } : { method: 'GET', path: '' });
    return res.status < 400 ? { ok: true, error: null } : { ok: false, error: `The provider answered ${res.status}` };
  } catch (err) {
    return { ok: false, error: describe(err) };
  }
}

/** Probes and records the outcome; the stored row, or undefined when there is no such connector. */
export async function verifyConnector(rt: ConnectorRuntime, db: Db, workspaceId: string, id: string, now: () => number) {
  // The call is made outside any transaction; only its outcome is written.
  const result = await probe(rt, db, workspaceId, id);
  if (!result) return undefined;
  return recordVerification(db, workspaceId, id, result.ok, result.error, new Date(now()));
}
