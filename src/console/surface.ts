/**
 * The browser console's files at /console: index.html and its hashed assets, built into
 * dist/console by `npm install` (scripts/build-console.ts). Every answer carries a strict
 * Content-Security-Policy (scripts and styles from this origin only, no inline script, no
 * framing), so even a value the console shows that came from a payload cannot run as code.
 * The console talks to the API with a bearer token like any client; this surface has no
 * authentication of its own because it serves only public, static files.
 */
import fs from 'node:fs';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Deps } from '../deps.ts';
import type { SurfaceSpec } from '../http/surface.ts';
import { renderPlainError } from '../http/render-error.ts';

export const CONSOLE_PATH = '/console';
/** Where `npm run build:console` writes the console. */
export const CONSOLE_DIST = path.resolve(import.meta.dirname, '..', '..', 'dist', 'console');

export const CONSOLE_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy': [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data:",
    "connect-src 'self'",
    "font-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; '),
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
};

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
};

interface Asset {
  type: string;
  body: Buffer;
  gzip: Buffer;
}

function readAsset(file: string): Asset {
  const body = fs.readFileSync(file);
  return { type: TYPES[path.extname(file)] ?? 'application/octet-stream', body, gzip: gzipSync(body) };
}

/** The built console in memory: index.html and every file of assets/, by name. */
function loadConsole(dir: string): { index: Asset; assets: Map<string, Asset> } | undefined {
  const indexFile = path.join(dir, 'index.html');
  if (!fs.existsSync(indexFile)) return undefined;
  const assets = new Map<string, Asset>();
  const assetDir = path.join(dir, 'assets');
  for (const name of fs.existsSync(assetDir) ? fs.readdirSync(assetDir) : []) assets.set(name, readAsset(path.join(assetDir, name)));
  return { index: readAsset(indexFile), assets };
}

function send(request: FastifyRequest, reply: FastifyReply, asset: Asset, cacheControl: string) {
  const gzip = /\bgzip\b/.test(String(request.headers['accept-encoding'] ?? ''));
  reply.headers(CONSOLE_HEADERS).header('cache-control', cacheControl).header('vary', 'accept-encoding').type(asset.type);
  if (gzip) reply.header('content-encoding', 'gzip');
  return reply.send(gzip ? asset.gzip : asset.body);
}

/**
 * What the console reads about the process that serves it, before anyone signs in: the URL
 * of the relay listening inside `serve` (RELAY_PORT), or null. It holds nothing of a
 * workspace: a provider is given the relay's address anyway.
 */
export interface ConsoleConfig {
  relay: { url: string } | null;
}

export const CONSOLE_CONFIG_PATH = `${CONSOLE_PATH}/config.json`;

/**
 * The relay's URL as the browser reaches it: a relay on every address answers on the host the
 * browser used for the console (its own listener names itself 127.0.0.1 or [::]). The Host
 * header comes back only to whoever sent it, and the answer is never cached.
 */
function relayUrlFor(request: FastifyRequest, relay: Deps['relay']): string {
  if (!relay.everyAddress) return relay.url!.replace(/\/+$/, '');
  const own = new URL(relay.url!);
  try {
    const asked = new URL(`http://${request.headers.host ?? ''}`);
    return `${own.protocol}//${asked.hostname}${own.port ? `:${own.port}` : ''}`;
  } catch {
    return own.origin;
  }
}

export function consoleSurface(deps: Pick<Deps, 'relay'>, dir: string = CONSOLE_DIST): SurfaceSpec {
  return {
    prefix: `${CONSOLE_PATH}/`,
    render: renderPlainError,
    setup(scope) {
      const built = loadConsole(dir);
      const index = async (request: FastifyRequest, reply: FastifyReply) => {
        if (!built) {
          reply.headers(CONSOLE_HEADERS).header('cache-control', 'no-store');
          return reply
            .code(503)
            .type('text/plain; charset=utf-8')
            .send('The console is not built. Run: npm run build:console (npm install does it), then restart.\n');
        }
        // Always asked again, so a new build's asset names are picked up at once.
        return send(request, reply, built.index, 'no-cache');
      };
      scope.get(CONSOLE_CONFIG_PATH, async (request, reply) => {
        const config: ConsoleConfig = { relay: deps.relay.url === undefined ? null : { url: relayUrlFor(request, deps.relay) } };
        return reply.headers(CONSOLE_HEADERS).header('cache-control', 'no-store').type('application/json').send(config);
      });
      // The router ignores a trailing slash: this is /console and /console/.
      scope.get(CONSOLE_PATH, index);
      scope.get<{ Params: { file: string } }>(`${CONSOLE_PATH}/assets/:file`, async (request, reply) => {
        const asset = built?.assets.get(request.params.file);
        if (!asset) {
          reply.headers(CONSOLE_HEADERS);
          return reply.code(404).type('text/plain; charset=utf-8').send('Not found\n');
        }
        // Names carry the content's hash: a file never changes under its name.
        return send(request, reply, asset, 'public, max-age=31536000, immutable');
      });
    },
  };
}
