/**
 * What the request lines of the log say: the request id (never a secret), the URL without
 * query values or the webhook token, and the error code of a failed request on its
 * "request completed" line.
 */
import { LogController, type FastifyBaseLogger, type FastifyReply, type FastifyRequest } from 'fastify';
import type { IncomingMessage } from 'node:http';
import type { Logger } from 'pino';
import { uuidv7 } from '../ids.ts';
import { REDACTED } from '../log.ts';
import { looksLikeSecret } from '../secrets.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** The error code the request was answered with, for its completion line. */
    errorCode: string | undefined;
  }
}

const REQUEST_ID_RE = /^[A-Za-z0-9._:-]{1,128}$/;
const QUERY_KEY_RE = /^[A-Za-z0-9_.[\]%-]{1,128}$/;

/** The caller's X-Request-Id when it is a short printable token that is no secret; else a new id. */
export function requestId(req: IncomingMessage): string {
  const given = req.headers['x-request-id'];
  return typeof given === 'string' && REQUEST_ID_RE.test(given) && !looksLikeSecret(given) ? given : uuidv7();
}

/**
 * The URL as logged: query values are replaced (a client may put anything there, secrets
 * included) and so is the webhook path token; parameter names stay, when they look like names.
 */
export function redactUrl(url: string): string {
  const q = url.indexOf('?');
  const path = (q < 0 ? url : url.slice(0, q)).replace(/(\/api\/v1\/webhooks\/)(?:[^/?]+\/)?[^/?]+/, `$1${REDACTED}`);
  if (q < 0) return path;
  const query = url
    .slice(q + 1)
    .split('&')
    .map((part) => {
      const eq = part.indexOf('=');
      const key = eq < 0 ? part : part.slice(0, eq);
      return QUERY_KEY_RE.test(key) ? `${key}=${REDACTED}` : REDACTED;
    })
    .join('&');
  return `${path}?${query}`;
}

/** The app's logger: the process logger with the request serializer above. */
export function requestLogger(log: Logger): FastifyBaseLogger {
  return log.child(
    {},
    {
      serializers: {
        req: (req: FastifyRequest) => ({ method: req.method, url: redactUrl(req.url), remoteAddress: req.ip }),
      },
    },
  );
}

/** Fastify's own request lines, with `code` added to the completion line of a failed request. */
export class RequestLogController extends LogController {
  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    if (error || request.errorCode === undefined || this.isLogDisabled(request)) {
      super.requestCompleted(error, request, reply);
      return;
    }
    reply.log.info({ res: reply, responseTime: reply.elapsedTime, code: request.errorCode }, 'request completed');
  }
}
