/**
 * Idempotency-Key on POST/PATCH, scoped to the service account. The fingerprint is the
 * method, path with query, and the canonical body; a replay returns the stored status and
 * body. 5xx results are not stored, so a retry after a server fault runs again.
 *
 * Nothing is kept in plain text (secret-box.ts): an answer can carry a secret shown once (a
 * workflow's trigger tokens), so it is stored sealed; the fingerprint of a body that carries
 * a secret (a connector's) is a keyed hash.
 */
import { canonicalJson } from '../json.ts';
import { createHash } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Db } from '../db/connect.ts';
import { AppError } from '../errors.ts';
import { fingerprintMatches, keyedFingerprint, openAnswer, sealAnswer } from '../secret-box.ts';
import { claimKey, completeKey, findKey, releaseKey } from './idempotency.sql.ts';

const KEY_RE = /^[\x20-\x7e]{1,255}$/;
/** An in-flight claim older than this is considered abandoned by a crashed request. */
const LEASE_SECONDS = 60;

/** SHA-256 hex of what makes two requests the same; stored only as a keyed hash of it. */
function digest(request: FastifyRequest): string {
  return createHash('sha256')
    .update(`${request.method}\n${request.url}\n${canonicalJson(request.body ?? null)}`)
    .digest('hex');
}

export interface IdempotencyState {
  credentialId: string;
  key: string;
}

/**
 * preHandler: claim the key or answer from what is stored. Returns true when the reply was
 * sent. `secretKey` is the installation's connector key (deps.connectorKey).
 */
export async function beginIdempotent(db: Db, secretKey: Buffer, ttlSeconds: number, request: FastifyRequest, reply: FastifyReply): Promise<boolean> {
  const header = request.headers['idempotency-key'];
  if (header === undefined) return false;
  if (typeof header !== 'string' || !KEY_RE.test(header)) {
    throw new AppError('bad_request', 'Idempotency-Key must be 1-255 printable ASCII characters', { source: { header: 'Idempotency-Key' } });
  }
  const principal = request.principal!;
  const requestDigest = digest(request);
  if (await claimKey(db, principal.credentialId, header, keyedFingerprint(secretKey, requestDigest), ttlSeconds, LEASE_SECONDS)) {
    request.idempotency = { credentialId: principal.credentialId, key: header };
    return false;
  }
  const stored = await findKey(db, principal.credentialId, header);
  // Vanished between the two statements (released after a 5xx): ask the client to retry.
  if (!stored) throw new AppError('idempotency_key_in_flight', 'A request with this Idempotency-Key is in progress', { retryAfter: 1 });
  if (!fingerprintMatches(secretKey, stored.fingerprint, requestDigest)) {
    throw new AppError('idempotency_key_reused', 'This Idempotency-Key was used with different request parameters', { source: { header: 'Idempotency-Key' } });
  }
  if (stored.state === 'in_flight') {
    throw new AppError('idempotency_key_in_flight', 'A request with this Idempotency-Key is in progress', { retryAfter: 1 });
  }
  const body = openAnswer(secretKey, principal.credentialId, header, stored.body!);
  reply.header('idempotent-replayed', 'true');
  // Only status and body are stored; every 201 names what it created in links.self, as its Location did.
  const location = stored.status === 201 ? createdLocation(body) : undefined;
  if (location !== undefined) reply.header('location', location);
  reply.code(stored.status!).type('application/vnd.api+json').send(body);
  return true;
}

function createdLocation(body: string): string | undefined {
  try {
    const self = (JSON.parse(body) as { links?: { self?: unknown } }).links?.self;
    return typeof self === 'string' ? self : undefined;
  } catch {
    return undefined;
  }
}

/** onSend: store the first response (or free the key after a server fault). */
export async function finishIdempotent(db: Db, secretKey: Buffer, request: FastifyRequest, reply: FastifyReply, payload: unknown): Promise<void> {
  const state = request.idempotency;
  if (!state) return;
  request.idempotency = undefined;
  if (reply.statusCode >= 500 || typeof payload !== 'string') {
    await releaseKey(db, state.credentialId, state.key);
  } else {
    await completeKey(db, state.credentialId, state.key, reply.statusCode, sealAnswer(secretKey, state.credentialId, state.key, payload));
  }
}
