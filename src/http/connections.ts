/**
 * How long a client may take to send a request or to take its answer, and how connections
 * end. A client that sends its headers or its body slowly gets 408 and its connection
 * closed, so slow senders cannot hold sockets open without end; one that does not read its
 * answer loses its connection, so an unsent answer is not held in memory without end; while
 * draining, every response closes its connection, so a keep-alive client never sends a
 * request on a socket about to go away.
 */
import { Transform, type Readable } from 'node:stream';
import type { Server, ServerOptions } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyInstance, FastifyReply, FastifyRequest, FastifyServerOptions } from 'fastify';
import type { Config } from '../config.ts';
import type { Deps } from '../deps.ts';
import { AppError } from '../errors.ts';
import { uuidv7 } from '../ids.ts';
import { jsonApiErrorBody, JSONAPI_MEDIA_TYPE } from './jsonapi/errors.ts';
import type { RenderRaw } from './surface.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * 'idle': REQUEST_TIMEOUT_MS bounds each pause in the body rather than the whole body
     * (streamed uploads that may rightly take longer).
     */
    bodyTimeout?: 'idle';
  }
}

function hasBody(request: FastifyRequest): boolean {
  const length = request.headers['content-length'];
  return length !== undefined ? length !== '0' : request.headers['transfer-encoding'] !== undefined;
}

function rawResponse(status: string, contentType: string, body: string): string {
  return `HTTP/1.1 ${status}\r\nConnection: close\r\nContent-Type: ${contentType}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
}

// The request target of the bytes Node's parser refused, when they begin with the request line.
const REQUEST_LINE = /^[A-Za-z]+ (\/\S*) /;

/**
 * Errors Node's parser raises before there is a request: headers too slow (408), too large
 * (431) or malformed (400). Only the refused bytes are known: when they start with the
 * request line, the answer is in the shape of the surface whose path it names (`rawFor`),
 * else the JSON:API error document.
 */
function clientErrorHandler(rawFor: (target: string) => RenderRaw | undefined) {
  return (err: NodeJS.ErrnoException & { rawPacket?: unknown }, socket: Socket): void => {
    if (err.code === 'ECONNRESET' || socket.destroyed) return;
    if (!socket.writable) {
      socket.destroy();
      return;
    }
    const [status, e] =
      err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? ['408 Request Timeout', new AppError('request_timeout', 'The request headers did not arrive in time')]
        : err.code === 'HPE_HEADER_OVERFLOW'
          ? ['431 Request Header Fields Too Large', new AppError('bad_request', 'The request headers are too large')]
          : ['400 Bad Request', new AppError('bad_request', 'The request could not be read')];
    const code = Number(status.slice(0, 3));
    const target = Buffer.isBuffer(err.rawPacket) ? REQUEST_LINE.exec(err.rawPacket.toString('latin1', 0, 8192))?.[1] : undefined;
    const render = target === undefined ? undefined : rawFor(target);
    const { contentType, body } = render ? render(e, code) : { contentType: JSONAPI_MEDIA_TYPE, body: jsonApiErrorBody(e, uuidv7(), code) };
    socket.end(rawResponse(status, contentType, body), () => socket.destroy());
  };
}

/**
 * Fastify server options for the limits above; `rawFor` picks the shape of an answer
 * given before there is a request by the path it names.
 */
export function connectionOptions(
  config: Pick<Config, 'headersTimeoutMs' | 'trustProxy'>,
  rawFor: (target: string) => RenderRaw | undefined = () => undefined,
): { http: ServerOptions } & Pick<FastifyServerOptions, 'requestTimeout' | 'clientErrorHandler' | 'trustProxy'> {
  return {
    // Behind a balancer, request.ip (token-exchange windows, logs, the relay's X-Forwarded-For)
    // is the client's; the per-address connection cap still counts the socket's peer.
    trustProxy: config.trustProxy === false ? false : [...config.trustProxy],
    http: {
      headersTimeout: config.headersTimeoutMs,
      // Node checks the headers deadline on this period (30 s by default, which would stretch any short limit).
      connectionsCheckingInterval: Math.max(50, Math.min(1000, Math.floor(config.headersTimeoutMs / 4))),
    },
    // The body's deadline is ours (bodyDeadline below): Node's would also cut off long streamed uploads.
    requestTimeout: 0,
    clientErrorHandler: clientErrorHandler(rawFor),
  };
}

/**
 * The body as a stream that fails with 408 when the client is too slow. Node's own request
 * stream is left alone: destroying it would close the socket before the 408 is written.
 */
function bodyDeadline(raw: Readable, timeoutMs: number, idle: boolean): Transform {
  // Real time, not the deps clock: it measures a wait that real timers end.
  let last = Date.now();
  const body = new Transform({
    transform(chunk, _encoding, callback) {
      if (idle) last = Date.now();
      callback(null, chunk);
    },
  });
  const check = () => {
    // Data that arrived and waits for our own reader is no fault of the client.
    if (body.readableLength > 0 || body.writableLength > 0) last = Date.now();
    const left = last + timeoutMs - Date.now();
    if (left > 0) {
      timer = setTimeout(check, left);
      return;
    }
    raw.unpipe(body);
    const detail = idle ? `No part of the request body arrived for ${timeoutMs} ms` : `The request body did not arrive within ${timeoutMs} ms`;
    body.destroy(new AppError('request_timeout', detail));
  };
  let timer = setTimeout(check, timeoutMs);
  const stop = () => clearTimeout(timer);
  body.once('end', stop).once('close', stop);
  // A client that goes away mid-body: the same error (ECONNRESET) the handler would see on the request.
  raw.once('error', (err) => body.destroy(err));
  raw.pipe(body);
  return body;
}

/**
 * At most `max` open connections per client address: beyond it a new connection is closed
 * at once. Timeouts bound how long one slow connection lives; this bounds how many one
 * address can hold at a time, so it cannot take every file handle of the process.
 */
function capConnectionsPerAddress(server: Server, max: number): void {
  const open = new Map<string, number>();
  server.on('connection', (socket: Socket) => {
    const address = socket.remoteAddress ?? '';
    const count = (open.get(address) ?? 0) + 1;
    if (count > max) {
      socket.destroy();
      return;
    }
    open.set(address, count);
    socket.once('close', () => {
      const left = (open.get(address) ?? 1) - 1;
      if (left > 0) open.set(address, left);
      else open.delete(address);
    });
  });
}

function dropSlowRest(raw: FastifyRequest['raw'], timeoutMs: number): void {
  const timer = setTimeout(() => {
    if (!raw.complete) raw.socket?.destroy();
  }, timeoutMs);
  raw.once('end', () => clearTimeout(timer));
}

/**
 * The socket's idle timer, for this request only: it fires after `timeoutMs` with no byte
 * read or written. Bytes of the answer still waiting then mean the client is not taking
 * them: the connection is closed. Otherwise the quiet is the handler's own work, or a body
 * on its way (bodyDeadline's to judge), and nothing happens. Once the answer is out, Node
 * sets the keep-alive timer in its place.
 */
function dropUnreadAnswer(request: FastifyRequest, reply: FastifyReply, timeoutMs: number): void {
  reply.raw.setTimeout(timeoutMs, () => {
    const socket = reply.raw.socket;
    if (!socket || socket.destroyed || socket.writableLength === 0) return;
    request.log.info({ unsentBytes: socket.writableLength }, `the client took none of its answer for ${timeoutMs} ms; connection closed`);
    socket.destroy();
  });
}

const inFlight = new WeakMap<FastifyInstance, Set<FastifyRequest>>();

/** Requests that have not been answered yet, for the shutdown log. */
export function requestsInFlight(app: FastifyInstance): ReadonlySet<FastifyRequest> {
  return inFlight.get(app) ?? new Set();
}

export function registerConnectionHooks(app: FastifyInstance, deps: Pick<Deps, 'config' | 'draining'>): void {
  if (deps.config.maxConnectionsPerAddress > 0) capConnectionsPerAddress(app.server, deps.config.maxConnectionsPerAddress);
  const running = new Set<FastifyRequest>();
  inFlight.set(app, running);
  app.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
    running.add(request);
    reply.raw.once('close', () => running.delete(request));
    dropUnreadAnswer(request, reply, deps.config.responseTimeoutMs);
  });
  const bodies = new WeakMap<FastifyRequest, Transform>();
  app.addHook('preParsing', async (request: FastifyRequest, _reply: FastifyReply, payload: Readable) => {
    if (!hasBody(request) || request.raw.complete) return payload;
    const body = bodyDeadline(payload, deps.config.requestTimeoutMs, request.routeOptions.config?.bodyTimeout === 'idle');
    bodies.set(request, body);
    return body;
  });
  app.addHook('onSend', async (request: FastifyRequest, reply: FastifyReply, payload: unknown) => {
    // Draining: the client opens a new connection (to another instance) for its next request.
    // A body refused as too large before it was read whole: the rest is not worth reading,
    // so Node ends the connection once the answer is flushed instead of draining it.
    if (deps.draining.value || reply.statusCode === 408 || (reply.statusCode === 413 && !request.raw.complete)) reply.header('connection', 'close');
    return payload;
  });
  app.addHook('onResponse', async (request: FastifyRequest) => {
    // Answered before its body was read (401, 404, 413, ...): Node reads the rest and drops
    // it, so that the client, still sending, gets to read the answer instead of a reset.
    // That reading gets the same time as a body.
    const body = bodies.get(request);
    if (body) {
      request.raw.unpipe(body);
      body.destroy();
    }
    if (hasBody(request) && !request.raw.complete) {
      request.raw.resume();
      dropSlowRest(request.raw, deps.config.requestTimeoutMs);
    }
  });
}
