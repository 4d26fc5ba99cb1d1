/**
 * The one way to call through a connector (a workflow step, verification): the driver
 * chosen by the connector's type (http through its specification's operations, s3,
 * snowflake), the rate budget taken, the call made, and whatever went wrong sorted into a
 * CallFailure: permanent, or transient with the provider's Retry-After.
 */
import { failureSummary, WorkFailure } from '../errors.ts';
import type { TraceSpan } from '../tracing.ts';
import type { ConnectorRow } from './connectors.sql.ts';
import { callDriver, DRIVER_OPERATIONS, probeDriver } from './drivers.ts';
import { networkFailure } from './errors.ts';
import type { OutboundResponse } from './http.ts';
import { buildCall, operationOf, unknownDriverOperationText, unknownOperationText, type Scalars } from './operations.ts';
import { rateLimitOf, takeBudget } from './rate.ts';
import { providerExcerpt, redactor, urlForText, type Redact } from './redact.ts';
import { baseUrlOf, buildUrl, callHttp, connectorRecord, previewHttp, type ConnectorRuntime, type HttpCall, type HttpPreview } from './runtime.ts';
import { sentCredentials } from './auth.ts';
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

/**
 * Sends one call; a successful answer (below 400) comes back, anything else is thrown as a
 * CallFailure. Under a step's span (tracing.ts), the call has a client span of its own and
 * an http call sends it as `traceparent`.
 */
export type Send = (parts: CallParts, trace?: TraceSpan) => Promise<OutboundResponse>;

/**
 * The call of `target` through the connector, its driver chosen. A target the connector
 * cannot serve is a permanent CallFailure now, before any part of the call is computed.
 * `idempotencyKey` names the call to the provider (unsafe http methods).
 */
/** What a target resolves to on a connector: a driver's operation, or an http operation or method and path. */
type Resolved = { driver: ConnectorRow & { type: 's3' | 'snowflake' }; ref: string } | { http: Parameters<typeof buildCall>[0] };

/** The target on the connector, or the permanent CallFailure that says why it cannot be served. */
function resolveTarget(row: ConnectorRow, target: CallTarget): Resolved {
  if (isDriver(row)) {
    const ops = DRIVER_OPERATIONS[row.type]!;
    const ref = target.operation_ref;
    if (ref === undefined || !ops.includes(ref)) throw permanent(unknownDriverOperationText(row.type, ref, ops));
    return { driver: row, ref };
  }
  if (target.operation_ref === undefined) return { http: { method: target.method!, path: target.path! } };
  const operation = operationOf(row.operations, target.operation_ref);
  if (!operation) throw permanent(unknownOperationText(target.operation_ref, row.operations));
  return { http: { operation } };
}

/** A provider's answer, or the CallFailure that stands for it (any error, or a 4xx or 5xx answer). */
async function answered(rt: ConnectorRuntime, call: () => Promise<OutboundResponse>): Promise<OutboundResponse> {
  let res: OutboundResponse;
  try {
    res = await call();
  } catch (err) {
    throw callFailureOf(err);
  }
  if (res.status >= 400) throw answerFailure(res, rt.clock());
  return res;
}

/**
 * The call, counted once it was made: by driver and the provider's status (and, opted in,
 * connector and operation: its ref, or the method of a raw call, never the path), `error` when none answered. Under a
 * step's span it has a client span, named and labelled the same way (the host, never the
 * URL: its query may hold a key), which the call is given to send on.
 */
async function measured(
  rt: ConnectorRuntime,
  row: ConnectorRow,
  operation: string,
  call: (span: TraceSpan | undefined) => Promise<OutboundResponse>,
  parent: TraceSpan | undefined,
): Promise<OutboundResponse> {
  const span = parent?.child(`provider.call ${operation}`, 'client', {
    'tributary.connector.id': row.id,
    'tributary.connector.type': row.type ?? 'http',
    'tributary.operation': operation,
  });
  const started = performance.now();
  let status = 'error';
  try {
    const res = await call(span);
    status = String(res.status);
    span?.set({ 'http.response.status_code': res.status });
    if (res.status >= 400) span?.fail(status, `The provider answered ${status}`);
    return res;
  } catch (err) {
    span?.fail(errorTypeOf(err), failureSummary(callFailureOf(err).message));
    throw err;
  } finally {
    span?.end();
    rt.metrics.providerCall(row.id, operation, row.type ?? 'http', status, (performance.now() - started) / 1000);
  }
}

/** What kind of error a call met, for its span: a transport's code (ECONNREFUSED, UND_ERR_HEADERS_TIMEOUT), else the error's class. */
function errorTypeOf(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && /^[A-Z0-9_]{1,64}$/.test(code)) return code;
  return err instanceof Error ? err.name : 'error';
}

function operationLabel(t: Resolved, target: CallTarget): string {
  if ('driver' in t) return t.ref;
  return target.operation_ref ?? (target.method ?? 'GET').toUpperCase();
}

export function connectorCall(rt: ConnectorRuntime, row: ConnectorRow, target: CallTarget, idempotencyKey: string): Send {
  const t = resolveTarget(row, target);
  const operation = operationLabel(t, target);
  if ('driver' in t && t.driver.type === 'snowflake' && (target.body === undefined || !statementIsLiteral(target.body)))
    throw permanent('A snowflake statement must be a literal of the step (values go in bindings)');
  // The parts become a request before the budget is taken: a request that cannot be made spends none.
  const prepare = (parts: CallParts): ((span: TraceSpan | undefined) => Promise<OutboundResponse>) => {
    if ('driver' in t) return () => callDriver(rt, t.driver, t.ref, parts);
    const request = buildCall(t.http, parts, idempotencyKey);
    return (span) => callHttp(rt, row, request, span);
  };
  return (parts, trace) => answered(rt, () => withinBudget(rt, row, () => measured(rt, row, operation, prepare(parts), trace)));
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
): (parts: CallParts) => Promise<{ request: RequestPreview; send?: (trace?: TraceSpan) => Promise<OutboundResponse> }> {
  const t = resolveTarget(row, target);
  if ('driver' in t) return async (parts) => ({ request: { operation: t.ref, method: null, url: null, headers: parts.headers, body: parts.body ?? null } });
  return async (parts) => {
    try {
      const call = buildCall(t.http, parts, idempotencyKey);
      const operation = operationLabel(t, target);
      return {
        request: await previewHttp(rt, row, call),
        send: (trace) => answered(rt, () => measured(rt, row, operation, (span) => callHttp(rt, row, call, span), trace)),
      };
    } catch (err) {
      throw callFailureOf(err);
    }
  };
}

/** What verification calls: its method and URL for the error texts (no secret in them), and the call. */
export interface Probe {
  /** `GET https://api.example.com/v1/health`, `HeadBucket exports (https://s3.eu-west-1.amazonaws.com)`; undefined when the settings name no URL. */
  target: string | undefined;
  /** Throws a CallFailure when the connector does not work. */
  run(): Promise<void>;
}

/** The connector's sent credentials as a redactor, or none when its secret cannot be opened (the call then fails saying so). */
function redactorOf(rt: ConnectorRuntime, row: ConnectorRow): Redact {
  try {
    return redactor(sentCredentials(connectorRecord(rt, row)));
  } catch {
    return (v) => v;
  }
}

const text = (v: unknown) => (typeof v === 'string' && v !== '' ? v : undefined);

function driverTarget(row: ConnectorRow & { type: 's3' | 'snowflake' }, redact: Redact): string | undefined {
  const cfg = row.config ?? {};
  if (row.type === 's3') {
    const endpoint = text(cfg.endpoint) ?? (text(cfg.region) ? `https://s3.${text(cfg.region)}.amazonaws.com` : undefined);
    return `HeadBucket ${text(cfg.bucket) ?? '(no bucket)'}${endpoint ? ` (${urlForText(endpoint, redact)})` : ''}`;
  }
  const url = text(cfg.access_url) ?? (text(cfg.account) ? `https://${text(cfg.account)}.snowflakecomputing.com` : undefined);
  return url ? `select 1 on ${urlForText(url, redact)}` : undefined;
}

/**
 * One cheap call that tells whether the connector works (http: its configured
 * health_operation, else GET of the base URL; s3: HeadBucket; snowflake: SELECT 1). A
 * health_operation that cannot be called (no specification attached, or none of its
 * operations) is a permanent CallFailure now, with no call made: falling back to the base
 * URL would verify something else than what was configured.
 */
export function connectorProbe(rt: ConnectorRuntime, row: ConnectorRow): Probe {
  const redact = redactorOf(rt, row);
  if (isDriver(row)) {
    return {
      target: driverTarget(row, redact),
      run: async () => {
        try {
          await probeDriver(rt, row);
        } catch (err) {
          throw callFailureOf(err);
        }
      },
    };
  }
  const ref = row.config?.health_operation;
  let call: HttpCall = { method: 'GET', path: '' };
  if (ref !== undefined && ref !== null) {
    if (typeof ref !== 'string' || ref === '') throw permanent('config.health_operation must be the operation_ref of an operation of the attached api_spec');
    if (row.operations === null)
      throw permanent(
        `config.health_operation is ${JSON.stringify(ref)}, but the connector has no api_spec attached: attach the specification that declares it (api_spec external_connector_id), or remove health_operation`,
      );
    const op = operationOf(row.operations, ref);
    if (!op) throw permanent(`config.health_operation: ${unknownOperationText(ref, row.operations)}`);
    call = { method: op.method, path: op.path };
  }
  let target: string | undefined;
  try {
    target = `${call.method.toUpperCase()} ${urlForText(buildUrl(baseUrlOf(row), call.path, undefined), redact)}`;
  } catch {
    target = undefined;
  }
  return {
    target,
    run: async () => {
      await answered(rt, () => withinBudget(rt, row, () => callHttp(rt, row, call)));
    },
  };
}
