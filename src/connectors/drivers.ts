/**
 * The drivers other than http: s3 and snowflake. A step names one of the driver's
 * operations (operation_ref) and gets an http-shaped answer {status, headers, body}, so
 * steps and verification treat every driver alike; the connector's rate_limit applies to
 * them too.
 */
import type { ConnectorRow } from './connectors.sql.ts';
import type { OutboundResponse } from './http.ts';
import { RequestProblem } from './errors.ts';
import type { Scalars } from './operations.ts';
import { rateLimitOf, takeBudget } from './rate.ts';
import { connectorRecord, redactSecret, type ConnectorRuntime } from './runtime.ts';

export { DRIVER_OPERATIONS } from './driver-operations.ts';

// The SDKs are large (snowflake-sdk alone is ~400 ms and ~80 MiB to load): loaded on first use.
const s3 = () => import('./s3.ts');
const snowflake = () => import('./snowflake.ts');

export async function callDriver(rt: ConnectorRuntime, row: ConnectorRow, operation: string, parts: { params: Scalars; body: unknown }): Promise<OutboundResponse> {
  const connector = connectorRecord(rt, row);
  const limit = rateLimitOf(row.config);
  if (limit) await takeBudget(rt.counter, row.id, limit, rt.clock);
  switch (row.type) {
    case 's3':
      return redactSecret(await (await s3()).callS3(connector, rt.allowPrivateEgress, operation, parts.params, parts.body), connector.secret);
    case 'snowflake':
      return redactSecret(await (await snowflake()).callSnowflake(connector, rt.allowPrivateEgress, operation, parts.body), connector.secret);
    default:
      throw new RequestProblem(`No driver for connectors of type ${String(row.type)}`);
  }
}

/** A cheap call through the driver (S3: HeadBucket; Snowflake: SELECT 1); throws what went wrong. */
export async function probeDriver(rt: ConnectorRuntime, row: ConnectorRow): Promise<void> {
  const connector = connectorRecord(rt, row);
  if (row.type === 's3') await (await s3()).callS3(connector, rt.allowPrivateEgress, 'HeadBucket', {}, undefined);
  else await (await snowflake()).probeSnowflake(connector, rt.allowPrivateEgress);
}
