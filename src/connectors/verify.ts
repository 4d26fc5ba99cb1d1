/**
 * Verifying a connector: one cheap call through its driver (connectorProbe in call.ts). The
 * connector becomes `verified` or `failing`, with the time and, when failing, why and the
 * method and URL it called (never a secret: the texts are built here, not copied from
 * answers, and the URL is shown without credentials or query values). An inbound connector
 * is not probed: its deliveries decide its status (inbound-status.ts).
 */
import type { Db } from '../db/connect.ts';
import { callFailureOf, connectorProbe, type CallFailure } from './call.ts';
import { loadConnector, recordVerification } from './connectors.sql.ts';
import type { ConnectorRuntime } from './runtime.ts';
import { AppError } from '../errors.ts';
import { FAILING_AFTER } from './inbound-status.ts';

/** The 422 of verify on an inbound connector: nothing to call, its deliveries decide its status. */
export const INBOUND_VERIFY_TEXT =
  `An inbound connector is verified by its deliveries, not by a call: it becomes verified when a delivery passes its check ` +
  `(signature or API key) and failing after ${FAILING_AFTER} consecutive deliveries fail it (last_error says what failed and when). ` +
  `Send a delivery to its webhook trigger to verify it.`;

export interface VerifyResult {
  ok: boolean;
  error: string | null;
}

function describe(f: CallFailure): string {
  if (f.status !== undefined) return `The provider answered ${f.status}`;
  if (f.unnamed === undefined) return f.message;
  const code = (f.unnamed as { code?: unknown }).code;
  return typeof code === 'string' ? `The probe failed (${code})` : 'The probe failed';
}

export async function probe(rt: ConnectorRuntime, db: Db, workspaceId: string, id: string): Promise<VerifyResult | undefined> {
  const row = await loadConnector(db, workspaceId, id);
  if (!row) return undefined;
  // Probing an inbound connector would call a provider it never calls (and find no base_url).
  if (row.direction === 'inbound') throw new AppError('invalid_request', INBOUND_VERIFY_TEXT);
  let target: string | undefined;
  try {
    const probe = connectorProbe(rt, row);
    target = probe.target;
    await probe.run();
    return { ok: true, error: null };
  } catch (err) {
    const why = describe(callFailureOf(err));
    return { ok: false, error: target === undefined ? why : `${target}: ${why}` };
  }
}

/** Probes and records the outcome; the stored row, or undefined when there is no such connector. */
export async function verifyConnector(rt: ConnectorRuntime, db: Db, workspaceId: string, id: string, now: () => number) {
  // The call is made outside any transaction; only its outcome is written.
  const result = await probe(rt, db, workspaceId, id);
  if (!result) return undefined;
  return recordVerification(db, workspaceId, id, result.ok, result.error, new Date(now()));
}
