/**
 * METRICS_PORT's listener: `GET /metrics`, the process's registry in the Prometheus text
 * format, and nothing else. Its own socket, apart from the API's, so that it can be left
 * off the public network; it asks for no token. A plain node:http server: none of the
 * API's hooks (readiness, rate windows, request logs) concern a scrape.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Metrics } from '../metrics.ts';

export interface MetricsListener {
  url: string;
  close(): Promise<void>;
}

export async function listenMetrics(metrics: Metrics, port: number, host: string): Promise<MetricsListener> {
  const server = http.createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0];
    if (path !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end('Not found: the metrics are at /metrics\n');
      return;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD', 'content-type': 'text/plain; charset=utf-8' }).end('Method not allowed\n');
      return;
    }
    metrics.registry.metrics().then(
      (text) => {
        res.writeHead(200, { 'content-type': metrics.registry.contentType });
        res.end(req.method === 'HEAD' ? undefined : text);
      },
      () => {
        res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' }).end('The metrics could not be collected\n');
      },
    );
  });
  server.keepAliveTimeout = 5000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const shown = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return {
    url: `http://${shown}:${address.port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
