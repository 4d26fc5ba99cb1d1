/**
 * A provider on loopback for the connector tests: it records every request and answers
 * with whatever the test scripted (a queue of answers per path, then a default). Two paths
 * echo the request, as a debug endpoint or a careless error does: /echo/request answers 200
 * with the method, path, headers and body it got; /echo/token is an OAuth2 token endpoint
 * that refuses every request, quoting its body.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Recorded {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
  at: number;
}

export interface Answer {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
}

export interface MockProvider {
  url: string;
  requests: Recorded[];
  /** Answers for a path (without query), used in order; then `fallback`. */
  script(path: string, ...answers: Answer[]): void;
  fallback: (req: Recorded) => Answer;
  close(): Promise<void>;
}

function echo(rec: Recorded): Answer | undefined {
  const path = rec.path.split('?')[0];
  if (path === '/echo/request') return { status: 200, body: { method: rec.method, path: rec.path, headers: rec.headers, body: rec.body } };
  if (path === '/echo/token') return { status: 400, body: { error: `invalid_client for ${rec.body}` } };
  return undefined;
}

/** Listens on `host` (loopback unless told); `url` names 127.0.0.1 either way. */
export async function mockProvider(host = '127.0.0.1'): Promise<MockProvider> {
  const scripts = new Map<string, Answer[]>();
  const requests: Recorded[] = [];
  const mock: MockProvider = {
    url: '',
    requests,
    script(path, ...answers) {
      scripts.set(path, [...(scripts.get(path) ?? []), ...answers]);
    },
    fallback: () => ({ status: 200, body: { ok: true } }),
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const rec: Recorded = { method: req.method!, path: req.url!, headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), at: Date.now() };
      requests.push(rec);
      const queue = scripts.get(req.url!.split('?')[0]!);
      const answer = queue && queue.length > 0 ? queue.shift()! : (echo(rec) ?? mock.fallback(rec));
      const body = answer.body === undefined ? '' : typeof answer.body === 'string' ? answer.body : JSON.stringify(answer.body);
      res.writeHead(answer.status, { 'content-type': typeof answer.body === 'string' ? 'text/plain' : 'application/json', ...answer.headers });
      res.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  mock.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return mock;
}
