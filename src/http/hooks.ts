/**
 * Routes declare what they need in their options (`config`); these hooks enforce it, so a
 * handler never checks auth, scope, media type, rate or idempotency itself.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { epochSeconds, type Deps } from '../deps.ts';
import { AppError } from '../errors.ts';
import { authenticate, requireScope, verifyBearer, type Principal } from '../auth/principal.ts';
import type { Scope, TokenClaims } from '../auth/tokens.ts';
import { authenticateAdmin } from '../admin/admin-auth.ts';
import { beginIdempotent, finishIdempotent, type IdempotencyState } from './idempotency.ts';
import { chargeAccountWindow } from './rate-limit.ts';
import { JSONAPI_MEDIA_TYPE, type Surface } from './render-error.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    surface?: Surface;
    /** 'bearer': a service-account access token; 'admin': the admin token; absent: public. */
    auth?: 'bearer' | 'admin';
    scope?: Scope;
    /** Honour Idempotency-Key (POST/PATCH). */
    idempotent?: boolean;
    /** Count the request against the caller's rate window. */
    rateLimit?: 'account';
    /**
     * The handler re-checks the account itself, in the statement that reads its row, and
     * enforces `scope` after it; the hook only verifies the token's signature and expiry.
     */
    deferAccount?: boolean;
  }
  interface FastifyRequest {
    principal: Principal | undefined;
    /** Verified token claims, set for deferAccount routes before the account re-check. */
    claims: TokenClaims | undefined;
    idempotency: IdempotencyState | undefined;
  }
}

/** JSON:API 1.1 content negotiation: media type parameters other than ext/profile are refused. */
function acceptableJsonApi(mediaType: string): boolean {
  const [type, ...params] = mediaType.split(';').map((s) => s.trim());
  if (type?.toLowerCase() !== JSONAPI_MEDIA_TYPE) return false;
  return params.every((p) => /^(ext|profile)\s*=/i.test(p));
}

function negotiateJsonApi(request: FastifyRequest): void {
  const accept = request.headers.accept;
  if (accept !== undefined && accept.trim() !== '') {
    const ranges = accept.split(',').map((s) => s.trim());
    const ok = ranges.some((r) => {
      const type = r.split(';')[0]!.trim().toLowerCase();
      return type === '*/*' || type === 'application/*' || (type === JSONAPI_MEDIA_TYPE && acceptableJsonApi(r.replace(/;\s*q=[\d.]+/i, '')));
    });
    if (!ok) throw new AppError('not_acceptable', `Accept must allow ${JSONAPI_MEDIA_TYPE}`, { source: { header: 'Accept' } });
  }
  const hasBody = request.headers['content-length'] !== undefined ? request.headers['content-length'] !== '0' : request.headers['transfer-encoding'] !== undefined;
  // Only a body's media type matters: some clients send Content-Type on bodiless GETs.
  if (hasBody) {
    const ct = request.headers['content-type'];
    if (ct === undefined || !acceptableJsonApi(ct)) {
      throw new AppError('unsupported_media_type', `Content-Type must be ${JSONAPI_MEDIA_TYPE}`, { source: { header: 'Content-Type' } });
    }
  }
}

export function registerHooks(app: FastifyInstance, deps: Deps): void {
  app.decorateRequest('principal', undefined);
  app.decorateRequest('claims', undefined);
  app.decorateRequest('idempotency', undefined);

  app.addHook('onRequest', (request, reply, done) => {
    // A client that closes its connection before the answer is no server failure: one line, at info.
    reply.raw.once('close', () => {
      if (!reply.raw.writableFinished) request.log.info(deps.draining.value ? 'connection closed at shutdown before the answer' : 'client went away');
    });
    done();
  });

  app.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
    const cfg = request.routeOptions.config;
    if (cfg.auth === 'admin') {
      authenticateAdmin(deps.adminToken, request.headers.authorization);
    } else if (cfg.auth === 'bearer') {
      let credentialId: string;
      if (cfg.deferAccount) {
        request.claims = verifyBearer(deps.signingKey, request.headers.authorization, epochSeconds(deps.clock));
        credentialId = request.claims.sub;
      } else {
        request.principal = await authenticate(deps.db, deps.signingKey, request.headers.authorization, epochSeconds(deps.clock));
        credentialId = request.principal.credentialId;
      }
      if (cfg.rateLimit === 'account') await chargeAccountWindow(deps.limiter, deps.config.rateLimit, reply, credentialId);
      if (cfg.scope && request.principal) requireScope(request.principal, cfg.scope);
    }
    if (cfg.surface === 'jsonapi') negotiateJsonApi(request);
  });

  app.addHook('preHandler', async (request, reply) => {
    if (request.routeOptions.config.idempotent && request.principal) {
      await beginIdempotent(deps.db, deps.config.idempotencyTtlSeconds, request, reply);
    }
  });

  app.addHook('onSend', async (request, reply, payload) => {
    reply.header('x-request-id', request.id);
    // Fastify appends "; charset=utf-8" to JSON-like types; JSON:API 1.1 allows only ext/profile.
    if (/^application\/vnd\.api\+json; charset=utf-8$/i.test(String(reply.getHeader('content-type')))) reply.header('content-type', JSONAPI_MEDIA_TYPE);
    if (request.idempotency) await finishIdempotent(deps.db, request, reply, payload);
    return payload;
  });
}
