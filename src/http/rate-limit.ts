/**
 * The HTTP side of the rate windows: the RateLimit fields on a reply and the 429.
 */
import type { FastifyReply } from 'fastify';
import { AppError } from '../errors.ts';
import type { Limiter, WindowResult } from '../limiter.ts';

/** RateLimit and RateLimit-Policy fields (draft-ietf-httpapi-ratelimit-headers). */
export function rateLimitHeaders(r: WindowResult, windowSeconds: number): Record<string, string> {
  return {
    'ratelimit-policy': `"default";q=${r.limit};w=${windowSeconds}`,
    ratelimit: `"default";r=${r.remaining};t=${r.resetSeconds}`,
  };
}

/**
 * One request against the service account's window, shared by every surface (JSON:API,
 * GraphQL): sets the RateLimit fields, and refuses with 429 once the window is spent.
 */
export async function chargeAccountWindow(
  limiter: Limiter,
  limit: { max: number; windowSeconds: number },
  reply: FastifyReply,
  credentialId: string,
): Promise<void> {
  const r = await limiter.hit(`acct:${credentialId}`, limit.max, limit.windowSeconds);
  reply.headers(rateLimitHeaders(r, limit.windowSeconds));
  if (!r.allowed) throw new AppError('rate_limited', 'Rate window exceeded; retry after the indicated time', { retryAfter: r.resetSeconds });
}
