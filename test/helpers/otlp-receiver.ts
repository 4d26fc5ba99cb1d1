/**
 * An OTLP/HTTP receiver on loopback for the tracing tests: POST /v1/traces with an OTLP JSON
 * body; it keeps every span (its attributes as one object, its resource's service.name) and
 * the headers of every export, and answers with the status it was given.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** A span as the receiver got it, its attributes as one object. */
export interface Received {
  traceId: string;
  spanId: string;
  parentSpanId: string | undefined;
  name: string;
  kind: number;
  attributes: Record<string, unknown>;
  status: { code?: number; message?: string };
  links: Array<{ traceId: string; spanId: string }>;
  service: unknown;
}

export const KIND = { internal: 1, server: 2, client: 3, producer: 4, consumer: 5 } as const;
export const ERROR = 2;

type AnyValue = { stringValue?: string; intValue?: number | string; boolValue?: boolean; doubleValue?: number };
const valueOf = (v: AnyValue): unknown => v.stringValue ?? (v.intValue !== undefined ? Number(v.intValue) : undefined) ?? v.boolValue ?? v.doubleValue;
const attributesOf = (list: Array<{ key: string; value: AnyValue }> | undefined) => Object.fromEntries((list ?? []).map((a) => [a.key, valueOf(a.value)]));

export interface Receiver {
  url: string;
  spans: Received[];
  /** The headers of every export request. */
  exports: http.IncomingHttpHeaders[];
  close(): Promise<void>;
}

/** An OTLP/HTTP receiver: POST /v1/traces with an OTLP JSON body, answered `status`. */
export async function otlpReceiver(status = 200): Promise<Receiver> {
  const r: Receiver = { url: '', spans: [], exports: [], close: async () => undefined };
  const server = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8').on('data', (c: string) => (body += c));
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/v1/traces') {
        res.writeHead(404).end();
        return;
      }
      assert.match(req.headers['content-type'] ?? '', /^application\/json/);
      r.exports.push(req.headers);
      for (const rs of JSON.parse(body).resourceSpans ?? []) {
        const service = attributesOf(rs.resource?.attributes)['service.name'];
        for (const ss of rs.scopeSpans ?? [])
          for (const s of ss.spans ?? [])
            r.spans.push({
              traceId: s.traceId,
              spanId: s.spanId,
              parentSpanId: s.parentSpanId || undefined,
              name: s.name,
              kind: s.kind,
              attributes: attributesOf(s.attributes),
              status: s.status ?? {},
              links: s.links ?? [],
              service,
            });
      }
      res.writeHead(status, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  r.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  r.close = async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  };
  return r;
}
