/**
 * The snowflake driver's calls through snowflake-sdk (a large module: drivers.ts loads this
 * file only when a Snowflake connector is called). The rules are in snowflake-sql.ts.
 */
import snowflake from 'snowflake-sdk';
import { SNOWFLAKE_OPERATIONS } from './driver-operations.ts';
import type { ConnectorRecord } from './auth.ts';
import type { OutboundResponse } from './http.ts';
import { RequestProblem } from './errors.ts';
import { buildStatement, mapSnowflakeError, MAX_RESULT_ROWS, snowflakeSettings, type Bind, type SnowflakeSettings } from './snowflake-sql.ts';

snowflake.configure({ logLevel: 'OFF' } as never);

function connect(s: SnowflakeSettings): Promise<snowflake.Connection> {
  const connection = snowflake.createConnection({
    account: s.account,
    username: s.username,
    password: s.password,
    warehouse: s.warehouse,
    database: s.database,
    schema: s.schema,
    role: s.role,
    application: 'Tributary',
    timeout: 30_000,
    // The run's attempts are the retries.
    sfRetryMaxLoginRetries: 1,
    ...(s.accessUrl ? { accessUrl: s.accessUrl } : {}),
  } as snowflake.ConnectionOptions);
  return new Promise((resolve, reject) => connection.connect((err) => (err ? reject(err) : resolve(connection))));
}

function execute(connection: snowflake.Connection, sqlText: string, binds: Bind[]): Promise<unknown[]> {
  return new Promise((resolve, reject) =>
    connection.execute({ sqlText, binds: binds as snowflake.Binds, complete: (err, _stmt, rows) => (err ? reject(err) : resolve(rows ?? [])) }),
  );
}

export async function callSnowflake(c: ConnectorRecord, allowPrivateEgress: boolean, operation: string, body: unknown): Promise<OutboundResponse> {
  if (operation !== 'submitStatement') throw new RequestProblem(`${operation} is not a snowflake operation (${SNOWFLAKE_OPERATIONS.join(', ')})`);
  const s = snowflakeSettings(c, allowPrivateEgress);
  const { sqlText, binds } = buildStatement(body);
  let connection: snowflake.Connection | undefined;
  try {
    connection = await connect(s);
    const rows = await execute(connection, sqlText, binds);
    if (rows.length > MAX_RESULT_ROWS) throw new RequestProblem(`The statement returned ${rows.length} rows; a step keeps at most ${MAX_RESULT_ROWS}`);
    return { status: 200, headers: {}, body: { rows, row_count: rows.length } };
  } catch (err) {
    if (err instanceof RequestProblem) throw err;
    throw mapSnowflakeError(err);
  } finally {
    connection?.destroy(() => undefined);
  }
}

/** Verification: SELECT 1. */
export async function probeSnowflake(c: ConnectorRecord, allowPrivateEgress: boolean): Promise<void> {
  await callSnowflake(c, allowPrivateEgress, 'submitStatement', { statement: 'select 1' });
}
