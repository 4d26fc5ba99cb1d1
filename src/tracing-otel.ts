/**
 * The OpenTelemetry side of tracing.ts, imported only when an OTLP endpoint is configured:
 * a tracer provider of this process (never the global one: a test runs several apps in one
 * process), a batch of spans sent over OTLP/HTTP JSON, and the W3C trace context read from
 * and written as `traceparent`/`tracestate`.
 *
 * Contexts are passed by hand (a span to its children) rather than through an async context
 * manager: the path of a delivery and of a run is explicit, and nothing else is traced.
 *
 * An unreachable or refusing collector never holds up a request or a run: spans wait in the
 * batch (up to its size, then the newest are dropped), and the failure is logged once per
 * outage, not per export.
 */
import os from 'node:os';
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes, type Context, type Span, type Tracer } from '@opentelemetry/api';
import { ExportResultCode, W3CTraceContextPropagator, type ExportResult } from '@opentelemetry/core';
import { BatchSpanProcessor, TracerProvider, type ReadableSpan, type SpanExporter } from '@opentelemetry/sdk-trace';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import type { Logger } from 'pino';
import type { TracingConfig } from './config.ts';
import type { SpanAttributes, SpanKind as Kind, TraceContext, TraceSpan, Tracing } from './tracing.ts';

const KINDS: Record<Kind, SpanKind> = {
  server: SpanKind.SERVER,
  client: SpanKind.CLIENT,
  consumer: SpanKind.CONSUMER,
  producer: SpanKind.PRODUCER,
  internal: SpanKind.INTERNAL,
};

/** How long one export may take, its retries included. */
const EXPORT_TIMEOUT_MS = 5000;

const propagator = new W3CTraceContextPropagator();
const getter = {
  get: (carrier: Record<string, string | undefined>, key: string) => carrier[key],
  keys: (carrier: Record<string, string | undefined>) => Object.keys(carrier),
};

/** The context a W3C trace context names, or the root when it is absent or malformed. */
function contextOf(parent: TraceContext | undefined): Context {
  if (typeof parent?.traceparent !== 'string') return ROOT_CONTEXT;
  const carrier = { traceparent: parent.traceparent, tracestate: typeof parent.tracestate === 'string' ? parent.tracestate : undefined };
  return propagator.extract(ROOT_CONTEXT, carrier, getter);
}

function attributesOf(attributes: SpanAttributes | undefined): Attributes | undefined {
  if (attributes === undefined) return undefined;
  const out: Attributes = {};
  for (const [k, v] of Object.entries(attributes)) if (v !== undefined && v !== null) out[k] = v;
  return out;
}

class OtelSpan implements TraceSpan {
  readonly traceId: string;
  readonly traceparent: string;
  readonly tracestate: string | undefined;
  #ended = false;
  readonly #tracer: Tracer;
  readonly #span: Span;

  constructor(tracer: Tracer, span: Span) {
    this.#tracer = tracer;
    this.#span = span;
    const c = span.spanContext();
    this.traceId = c.traceId;
    this.traceparent = `00-${c.traceId}-${c.spanId}-${(c.traceFlags & 0xff).toString(16).padStart(2, '0')}`;
    this.tracestate = c.traceState?.serialize() || undefined;
  }

  child(name: string, kind: Kind, attributes?: SpanAttributes): TraceSpan {
    return startSpan(this.#tracer, name, kind, trace.setSpan(ROOT_CONTEXT, this.#span), attributes);
  }

  set(attributes: SpanAttributes): void {
    this.#span.setAttributes(attributesOf(attributes)!);
  }

  link(context: TraceContext, attributes?: SpanAttributes): void {
    const linked = trace.getSpanContext(contextOf(context));
    if (linked !== undefined) this.#span.addLink({ context: linked, ...(attributes ? { attributes: attributesOf(attributes)! } : {}) });
  }

  fail(errorType: string, summary: string): void {
    this.#span.setAttribute('error.type', errorType);
    this.#span.setStatus({ code: SpanStatusCode.ERROR, message: summary });
  }

  end(): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#span.end();
  }
}

function startSpan(tracer: Tracer, name: string, kind: Kind, parent: Context, attributes: SpanAttributes | undefined): OtelSpan {
  const attrs = attributesOf(attributes);
  return new OtelSpan(tracer, tracer.startSpan(name, { kind: KINDS[kind], ...(attrs ? { attributes: attrs } : {}) }, parent));
}

/**
 * The OTLP exporter, its outcome told to the log once per change: the first failed export of
 * an outage (at warn, with what failed and never the headers), then nothing until one
 * succeeds again (at info).
 */
export function quietExporter(inner: SpanExporter, log: Logger): SpanExporter {
  let failing = false;
  return {
    export(spans: ReadableSpan[], done: (result: ExportResult) => void) {
      inner.export(spans, (result) => {
        if (result.code !== ExportResultCode.SUCCESS) {
          if (!failing) {
            const err = result.error as { message?: unknown; code?: unknown } | undefined;
            log.warn(
              { spans: spans.length, err: { message: String(err?.message ?? 'unknown error').slice(0, 200), code: err?.code } },
              'could not send traces to the collector; spans are dropped until it answers',
            );
          }
          failing = true;
        } else if (failing) {
          failing = false;
          log.info('traces reach the collector again');
        }
        done(result);
      });
    },
    shutdown: () => inner.shutdown(),
    forceFlush: () => inner.forceFlush?.() ?? Promise.resolve(),
  };
}

export function openTracing(config: TracingConfig, log: Logger, flushTimeoutMs: number): Tracing {
  const exporter = new OTLPTraceExporter({ url: config.url, headers: { ...config.headers }, timeoutMillis: EXPORT_TIMEOUT_MS });
  const provider = new TracerProvider({
    resource: resourceFromAttributes({
      'service.name': config.serviceName,
      'service.instance.id': `${os.hostname()}:${process.pid}`,
    }),
    // A span holds ids, types and statuses; a longer value is cut rather than sent.
    spanLimits: { attributeValueLengthLimit: 1024, attributeCountLimit: 64, linkCountLimit: 16 },
    spanProcessors: [new BatchSpanProcessor({ exporter: quietExporter(exporter, log), exportTimeoutMillis: EXPORT_TIMEOUT_MS })],
  });
  const tracer = provider.getTracer('tributary');
  let closed: Promise<void> | undefined;
  return {
    enabled: true,
    start: (name, kind, parent, attributes) => startSpan(tracer, name, kind, contextOf(parent), attributes),
    close: () =>
      (closed ??= (async () => {
        let timer: NodeJS.Timeout | undefined;
        const timeout = new Promise<void>((resolve) => {
          timer = setTimeout(resolve, flushTimeoutMs);
          timer.unref();
        });
        await Promise.race([provider.shutdown().catch(() => undefined), timeout]);
        clearTimeout(timer);
      })()),
  };
}
