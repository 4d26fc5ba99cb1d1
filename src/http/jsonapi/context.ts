/**
 * The JSON:API surface (/api/json/v1): a bearer token of a service account on every route,
 * then the caller's rate window, the route's permission, JSON:API content negotiation, and
 * Idempotency-Key on the routes that honour it. Routes say what they need in their
 * `config`; these hooks enforce it, so a handler never checks any of it itself.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Deps } from '../../deps.ts';
import { epochSeconds } from '../../deps.ts';
import { AppError } from '../../errors.ts';
import { authenticate, verifyBearer, type Principal } from '../../auth/principal.ts';
import { authorize, type Permission } from '../../auth/access.ts';
import type { TokenClaims } from '../../auth/tokens.ts';
import { beginIdempotent, finishIdempotent, type IdempotencyState } from '../idempotency.ts';
import { chargeAccountWindow } from '../rate-limit.ts';
import type { SurfaceSpec } from '../surface.ts';
import { JSONAPI_MEDIA_TYPE, renderJsonApiError } from './errors.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** What a JSON:API route needs of its caller (auth/access.ts). */
    permission?: Permission;
    /** Honour Idempotency-Key (POST/PATCH). */
    idempotent?: boolean;
    /** Count the request against this window: the service account's. */
    rateLimit?: 'account';
    /**
     * The handler re-checks the account itself, in the statement that reads its row, and
     * authorizes `permission` after it; the hook only verifies the token's signature and expiry.
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

export const JSONAPI_PREFIX = '/api/json/';

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
  const hasBody =
    request.headers['content-length'] !== undefined ? request.headers['content-length'] !== '0' : request.headers['transfer-encoding'] !== undefined;
  // Only a body's media type matters: some clients send Content-Type on bodiless GETs.
  if (hasBody) {
    const ct = request.headers['content-type'];
    if (ct === undefined || !acceptableJsonApi(ct)) {
      throw new AppError('unsupported_media_type', `Content-Type must be ${JSONAPI_MEDIA_TYPE}`, { source: { header: 'Content-Type' } });
    }
  }
}

/** The JSON:API surface with the routes `registerRoutes` adds to it. */
export function jsonApiContext(deps: Deps, registerRoutes: (scope: FastifyInstance) => void): SurfaceSpec {
  return {
    prefix: JSONAPI_PREFIX,
    render: renderJsonApiError,
    setup(scope) {
      scope.decorateRequest('principal', undefined);
      scope.decorateRequest('claims', undefined);
      scope.decorateRequest('idempotency', undefined);

      // The authenticator: the token, the account re-checked (unless the route does it in
      // its own statement), the account's rate window, the permission; then negotiation.
      scope.addHook('onRequest', async (request, reply) => {
        const cfg = request.routeOptions.config;
        let credentialId: string;
        if (cfg.deferAccount) {
          request.claims = verifyBearer(deps.signingKey, request.headers.authorization, epochSeconds(deps.clock));
          credentialId = request.claims.sub;
        } else {
          request.principal = await authenticate(deps.db, deps.signingKey, request.headers.authorization, epochSeconds(deps.clock));
          credentialId = request.principal.credentialId;
        }
        if (cfg.rateLimit === 'account') await chargeAccountWindow(deps.limiter, deps.config.rateLimit, reply, credentialId);
        if (cfg.permission && request.principal) authorize(request.principal, cfg.permission);
        negotiateJsonApi(request);
      });

      // The two Idempotency-Key hooks take callbacks, not async functions: on the reads
      // (most requests) they do nothing, and then cost no promise.
      scope.addHook('preHandler', (request, reply, done) => {
        const { config } = request.routeOptions;
        if (!config.idempotent || !request.principal) return done();
        beginIdempotent(deps.db, deps.connectorKey, deps.config.idempotencyTtlSeconds, request, reply).then(
          // A replay is answered by beginIdempotent; the handler must not run then.
          (replayed) => {
            if (!replayed) done();
          },
          done,
        );
      });

      scope.addHook('onSend', (request, reply, payload, done) => {
        if (!request.idempotency) return done(null, payload);
        finishIdempotent(deps.db, deps.connectorKey, request, reply, payload).then(() => done(null, payload), done);
      });

      registerRoutes(scope);
    },
  };
}
