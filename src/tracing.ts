/**
 * Traces (docs/tracing.md): one trace from a webhook delivery through its queued run to each
 * step and each provider call, sent over OTLP/HTTP when an endpoint is configured.
 *
 * Off (no endpoint), nothing of OpenTelemetry is loaded: `start` answers undefined, and a
 * span is passed around as `TraceSpan | undefined` and used with `?.`, which skips the call
 * and the building of its arguments. On, deps.ts imports `tracing-otel.ts` once, at start.
 *
 * A span never carries a payload, a header value, a URL's query, a token or a secret: its
 * name is a route pattern or a fixed word, its attributes ids, types, counts and statuses.
 */
export type SpanKind = 'server' | 'client' | 'consumer' | 'producer' | 'internal';
export type SpanAttributes = Readonly<Record<string, string | number | boolean | null | undefined>>;

/** A W3C trace context as it travels: in a request's headers, on a run row. */
export interface TraceContext {
  traceparent: string | null | undefined;
  tracestate?: string | null | undefined;
}

export interface TraceSpan {
  /** 32 lowercase hex digits. */
  readonly traceId: string;
  /** This span as a W3C `traceparent`: what its children elsewhere (a run, a provider) name as their parent. */
  readonly traceparent: string;
  readonly tracestate: string | undefined;
  child(name: string, kind: SpanKind, attributes?: SpanAttributes): TraceSpan;
  /** Undefined and null values are left out. */
  set(attributes: SpanAttributes): void;
  /** A link to a span of another trace (a replay's original run); a malformed context is ignored. */
  link(context: TraceContext, attributes?: SpanAttributes): void;
  /** Status ERROR, with `error.type` and a summary that quotes no data (no payload, answer or value). */
  fail(errorType: string, summary: string): void;
  /** Ends it once; later calls do nothing. */
  end(): void;
}

export interface Tracing {
  readonly enabled: boolean;
  /** A span under a context from elsewhere (a request's headers, a run row); the root of a new trace when there is none or it is malformed. */
  start(name: string, kind: SpanKind, parent: TraceContext | undefined, attributes?: SpanAttributes): TraceSpan | undefined;
  /** Sends the spans still buffered and stops, within FLUSH_TIMEOUT_MS whether the collector answers or not. */
  close(): Promise<void>;
}

/** How long closing waits for the last spans to reach the collector. */
export const FLUSH_TIMEOUT_MS = 5000;

export const NO_TRACING: Tracing = Object.freeze({
  enabled: false,
  start: () => undefined,
  close: async () => undefined,
});

/** A span's context as a run row stores it (columns traceparent, tracestate); nulls without a span. */
export interface StoredTraceContext {
  traceparent: string | null;
  tracestate: string | null;
}

export const storedContext = (span: TraceSpan | undefined): StoredTraceContext => ({
  traceparent: span?.traceparent ?? null,
  tracestate: span?.tracestate ?? null,
});
