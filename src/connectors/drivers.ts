/**
 * The drivers other than http: s3 and snowflake. A step names one of the driver's
 * operations (operation_ref) and gets an http-shaped answer {status, headers, body}, so
 * steps and verification treat every driver alike (call.ts chooses among them and takes
 * the connector's rate budget).
 */
import type { ConnectorRow } from './connectors.sql.ts';
import type { OutboundResponse } from './http.ts';
import { RequestProblem } from './errors.ts';
import type { Scalars } from './operations.ts';
import { connectorRecord, type ConnectorRuntime } from './runtime.ts';
import { sentCredentials } from './auth.ts';
import { redactError, redactor } from './redact.ts';

export { DRIVER_OPERATIONS } from './driver-operations.ts';

// The SDKs are large and slow to load (snowflake-sdk most of all): loaded on first use, by the processes that call them.
const s3 = () => import('./s3.ts');
const snowflake = () => import('./snowflake.ts');

export async function callDriver(
  rt: ConnectorRuntime,
  row: ConnectorRow,
  operation: string,
  parts: { params: Scalars; body: unknown },
): Promise<OutboundResponse> {
  const connector = connectorRecord(rt, row);
  if (row.type !== 's3' && row.type !== 'snowflake') throw new RequestProblem(`No driver for connectors of type ${String(row.type)}`);
  const redact = redactor(sentCredentials(connector));
  try {
    const res =
      row.type === 's3'
        ? await (await s3()).callS3(connector, rt.allowPrivateEgress, operation, parts.params, parts.body)
        : await (await snowflake()).callSnowflake(connector, rt.allowPrivateEgress, operation, parts.body);
    return redact(res);
  } catch (err) {
    throw redactError(err, redact);
  }
}

/** A cheap call through the driver (S3: HeadBucket; Snowflake: SELECT 1); throws what went wrong. */
export async function probeDriver(rt: ConnectorRuntime, row: ConnectorRow): Promise<void> {
  const connector = connectorRecord(rt, row);
  try {
    if (row.type === 's3') await (await s3()).callS3(connector, rt.allowPrivateEgress, 'HeadBucket', {}, undefined);
    else await (await snowflake()).probeSnowflake(connector, rt.allowPrivateEgress);
  } catch (err) {
    throw redactError(err, redactor(sentCredentials(connector)));
  }
}
