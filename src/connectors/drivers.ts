/**
 * The drivers other than http: s3 (@aws-sdk/client-s3) and snowflake (snowflake-sdk).
 * Each takes its settings from the connector's config and its secret, and answers in the
 * shape of an http call's result, so steps and verification treat them alike.
 */
import type { ConnectorRow } from './connectors.sql.ts';
import type { ConnectorRuntime } from './runtime.ts';
import type { VerifyResult } from './verify.ts';

export async function probeDriver(_rt: ConnectorRuntime, row: ConnectorRow): Promise<VerifyResult> {
  return { ok: false, error: `The ${row.type} driver is not available in this build` };
}
