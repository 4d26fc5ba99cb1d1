/**
 * The one way to call through a connector (a workflow step, verification): the driver
 * chosen by the connector's type (http through its specification's operations, s3,
 * snowflake), the rate budget taken, the call made, and whatever went wrong sorted into a
 * CallFailure: permanent, or transient with the provider's Retry-After.
 */
import { WorkFailure } from '../errors.ts';
import type { ConnectorRow } from './connectors.sql.ts';
import { callDriver, DRIVER_OPERATIONS, probeDriver } from './drivers.ts';
import { networkFailure } from './errors.ts';
import type { OutboundResponse } from './http.ts';
import { buildCall, operationOf, type Scalars } from './operations.ts';
import { rateLimitOf, takeBudget } from './rate.ts';
import { providerExcerpt } from './redact.ts';
import { callHttp, previewHttp, type ConnectorRuntime, type HttpPreview } from './runtime.ts';
import { statementIsLiteral } from './snowflake-sql.ts';

/**
 * A call that got no successful answer. `status` is the provider's when it answered 4xx or
 * 5xx; `unnamed` is the error itself when it was none the connectors name (the message is
 * then made here, and a caller that must not quote it can tell).
 */
export class CallFailure extends WorkFailure {
  readonly status: number | undefined;
  readonly unnamed: unknown;
  constructor(message: string, opts: { transient: boolean; retryAfterMs?: number; status?: number; unnamed?: unknown }) {
    super(message, { transient: opts.transient, retryAfterMs: opts.retryAfterMs, cause: opts.unnamed });
    this.name = 'CallFailure';
    this.status = opts.status;
    this.unnamed = opts.unnamed;
  }
}

const permanent = (message: string) => new CallFailure(message, { transient: false });

/** Seconds or an HTTP date, as milliseconds from now. */
export function retryAfterMs(value: string | undefined, now: number): number | undefined {
  if (value === undefined) return undefined;
  if (/^\d+$/.test(value.trim())) return Number(value.trim()) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/** Anything a call threw, sorted: the connectors' own failures keep their kind and text; transport failures are transient. */
export function callFailureOf(err: unknown): CallFailure {
  if (err instanceof CallFailure) return err;
  const named = err instanceof WorkFailure ? err : networkFailure(err);
  if (named) return new CallFailure(named.message, { transient: named.transient, retryAfterMs: named.retryAfterMs });
  if ((err as { code?: unknown }).code === 'UND_ERR_RES_EXCEEDED_MAX_SIZE')
    return new CallFailure('The provider answered with more than the response size limit', { transient: false, unnamed: err });
  return new CallFailure(`The call failed: ${(err as Error).message?.slice(0, 200) ?? 'unknown error'}`, { transient: true, unnamed: err });
}

/** A provider's answer of 4xx or 5xx as a failure: 429 and 5xx are transient (with its Retry-After), the rest permanent. */
function answerFailure(res: OutboundResponse, now: number): CallFailure {
  if (res.status === 429 || res.status >= 500) {
    return new CallFailure(`The provider answered ${res.status}`, {
      transient: true,
      retryAfterMs: retryAfterMs(res.headers['retry-after'], now),
      status: res.status,
    });
  }
  return new CallFailure(`The provider answered ${res.status}: ${providerExcerpt(res.body)}`, { transient: false, status: res.status });
}

const isDriver = (row: ConnectorRow): row is ConnectorRow & { type: 's3' | 'snowflake' } => row.type === 's3' || row.type === 'snowflake';

async function withinBudget<T>(rt: ConnectorRuntime, row: ConnectorRow, call: () => Promise<T>): Promise<T> {
  const limit = rateLimitOf(row.config);
  if (limit) await takeBudget(rt.counter, row.id, limit, rt.clock);
  return call();
}

/** What a call asks of a connector, as a step writes it. */
export interface CallTarget {
  /** An operation of the driver (s3, snowflake) or of the connector's specification (http). */
  operation_ref?: string | undefined;
  /** Without an operation (http only): the method and the path under the base URL. */
  method?: string | undefined;
  path?: string | undefined;
  /** The body as the step wrote it, before evaluation: a snowflake statement must be a literal there. */
  body?: string | undefined;
}

export interface CallParts {
  params: Scalars;
  query: Scalars;
  headers: Scalars;
  body: unknown;
}

/** Sends one call; a successful answer (below 400) comes back, anything else is thrown as a CallFailure. */
export type Send = (parts: CallParts) => Promise<OutboundResponse>;

/**
 * The call of `target` through the connector, its driver chosen. A target the connector
 * cannot serve is a permanent CallFailure now, before any part of the call is computed.
 * `idempotencyKey` names the call to the provider (unsafe http methods).
 */
export function connectorCall(rt: ConnectorRuntime, row: ConnectorRow, target: CallTarget, idempotencyKey: string): Send {
  // The parts become a request before the budget is taken: a request that cannot be made spends none.
  let prepare: (parts: CallParts) => () => Promise<OutboundResponse>;
  if (isDriver(row)) {
    const ops = DRIVER_OPERATIONS[row.type]!;
    const ref = target.operation_ref;
    if (ref === undefined || !ops.includes(ref)) throw permanent(`A ${row.type} connector performs ${ops.join(', ')} (operation_ref)`);
    if (row.type === 'snowflake' && (target.body === undefined || !statementIsLiteral(target.body)))
      throw permanent('A snowflake statement must be a literal of the step (values go in bindings)');
    prepare = (parts) => () => callDriver(rt, row, ref, parts);
  } else {
    let http: Parameters<typeof buildCall>[0];
    if (target.operation_ref !== undefined) {
      const operation = operationOf(row.operations, target.operation_ref);
      if (!operation) throw permanent(`${target.operation_ref} is not an operation of the connector's specification (any more)`);
      http = { operation };
    } else http = { method: target.method!, path: target.path! };
    prepare = (parts) => {
      const request = buildCall(http, parts, idempotencyKey);
      return () => callHttp(rt, row, request);
    };
  }
  return async (parts) => {
    let res: OutboundResponse;
    try {
      res = await withinBudget(rt, row, prepare(parts));
    } catch (err) {
      throw callFailureOf(err);
    }
    if (res.status >= 400) throw answerFailure(res, rt.clock());
    return res;
  };
}

/** A test run's view of a call: an http request as it would be sent, or a driver's operation (never sent in a test run). */
export type RequestPreview = HttpPreview | { operation: string; method: null; url: null; headers: Record<string, string>; body: unknown };

/**
 * The call of `target` as connectorCall would make it, for a test run: the request shown
 * (credentials redacted) and, for an http connector, a send that takes no rate budget (a
 * test must not spend the budget of the real runs).
 */
export function previewCall(
  rt: ConnectorRuntime,
  row: ConnectorRow,
  target: CallTarget,
  idempotencyKey: string,
): (parts: CallParts) => Promise<{ request: RequestPreview; send?: () => Promise<OutboundResponse> }> {
  if (isDriver(row)) {
    const ops = DRIVER_OPERATIONS[row.type]!;
    const ref = target.operation_ref;
    if (ref === undefined || !ops.includes(ref)) throw permanent(`A ${row.type} connector performs ${ops.join(', ')} (operation_ref)`);
    return async (parts) => ({ request: { operation: ref, method: null, url: null, headers: parts.headers, body: parts.body ?? null } });
  }
  let http: Parameters<typeof buildCall>[0];
  if (target.operation_ref !== undefined) {
    const operation = operationOf(row.operations, target.operation_ref);
    if (!operation) throw permanent(`${target.operation_ref} is not an operation of the connector's specification (any more)`);
    http = { operation };
  } else http = { method: target.method!, path: target.path! };
  return async (parts) => {
    try {
      const call = buildCall(http, parts, idempotencyKey);
      const request = await previewHttp(rt, row, call);
      const send = async () => {
        let res: OutboundResponse;
        try {
          res = await callHttp(rt, row, call);
        } catch (err) {
          throw callFailureOf(err);
        }
        if (res.status >= 400) throw answerFailure(res, rt.clock());
        return res;
      };
      return { request, send };
    } catch (err) {
      throw callFailureOf(err);
    }
  };
}

/**
 * One cheap call that tells whether the connector works (http: its configured
 * health_operation, else GET of the base URL; s3: HeadBucket; snowflake: SELECT 1).
 * Throws a CallFailure when it does not.
 */
export async function probeConnector(rt: ConnectorRuntime, row: ConnectorRow): Promise<void> {
  let res: OutboundResponse;
  try {
    if (isDriver(row)) return await probeDriver(rt, row);
    const health = typeof row.config?.health_operation === 'string' ? operationOf(row.operations, row.config.health_operation) : undefined;
    res = await withinBudget(rt, row, () => callHttp(rt, row, health ? { method: health.method, path: health.path } : { method: 'GET', path: '' }));
  } catch (err) {
    throw callFailureOf(err);
  }
  if (res.status >= 400) throw answerFailure(res, rt.clock());
}
