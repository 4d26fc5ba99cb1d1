/**
 * The webhook surface: POST /api/v1/webhooks/:token (and the deprecated
 * /api/v1/webhooks/:org_domain/:token). One delivery makes at most one workflow run.
 *
 * The checks run in a fixed order (docs/webhooks.md), each with its status and text:
 * body size 413, bearer token 401 missing_credentials, trigger 404, account and
 * organization 401, scope 403, connector mode 422, connector verification 401, the
 * trigger's window 429, JSON (or, with `accept: form`, a form: form.ts) 422, the
 * workspace's waiting runs 429 (QUOTA_WAITING_RUNS),
 * then one statement commits the guard and the run (503 when the database is unavailable). The body is read as bytes (verification needs
 * them) within WEBHOOK_MAX_BODY_BYTES: a Content-Length over it is refused before reading,
 * a streamed body is cut off at it.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Deps } from '../deps.ts';
import { epochSeconds } from '../deps.ts';
import { AppError, databaseUnavailable, fromPgError, type ErrorCode } from '../errors.ts';
import { bearerProblem, principalOf, tokenStanding, verifyBearer } from '../auth/principal.ts';
import { permits } from '../auth/access.ts';
import type { TokenClaims } from '../auth/tokens.ts';
import type { SurfaceSpec } from '../http/surface.ts';
import { rateLimitHeaders } from '../http/rate-limit.ts';
import { uuidv7 } from '../ids.ts';
import { isJsonMediaType, isObject, parseJson } from '../json.ts';
import { sha256Hex } from '../secrets.ts';
import { deliveryIdentity, MAX_DELIVERY_ID_LENGTH } from '../triggers/identity.ts';
import { wakeWorkers } from '../runs/wake.ts';
import { DEFAULT_SIGNATURE_SCHEME, isSignatureScheme, SIGNATURE_HEADER_NAMES, verifySignature, type SignedId } from '../connectors/signature-schemes.ts';
import type { InboundCheck } from '../connectors/inbound-status.ts';
import { DEFAULT_API_KEY_HEADER, verifyApiKey } from './verify.ts';
import { headerNameProblem, secretProblem } from '../connectors/inbound-rules.ts';
import { acceptDelivery, loadAccountAndTrigger, type Admission, type TriggerRow } from './webhooks.sql.ts';
import { deliveryHeaders, expressionDelivery } from '../triggers/delivery-headers.ts';
import { matchWaitingRun } from '../runs/delivery-waits.ts';
import { runConcurrency, type RunConcurrency } from '../runs/concurrency.ts';
import { runStateKey, type RunStateKey } from '../runs/state-key.ts';
import { FORM_MEDIA_TYPE, formPayload, isFormMediaType } from './form.ts';
import type { WebhookAccept } from '../db/tables.ts';
import { boundedMap, type BoundedMap } from '../bounded-map.ts';
import { WAITING_RUNS_RETRY_AFTER_SECONDS, waitingRunsRefusal } from '../quotas/quotas.ts';

export const WEBHOOK_PREFIX = '/api/v1/webhooks/';

/** With `true`, a trigger without an `api_key` or `hmac` inbound connector is refused (401 Unauthorized). */
export const REQUIRE_VERIFICATION_HEADER = 'tributary-require-verification';

/** The contract's texts (Errors / Webhook ingestion), by the code that carries them. */
export const WEBHOOK_TEXT = {
  missingCredentials: 'missing_credentials',
  unauthorized: 'Unauthorized',
  insufficientScope: 'Insufficient scope',
  triggerNotFound: 'Trigger not found',
  tooLarge: 'Request body too large',
  processingFailed: 'Processing failed',
  unsupportedAuth: 'Unsupported trigger authentication',
  rateLimited: 'Rate limit exceeded',
  unavailable: 'Processing temporarily unavailable',
} as const;

const TEXT_BY_CODE: Partial<Record<ErrorCode, string>> = {
  unauthorized: WEBHOOK_TEXT.unauthorized,
  forbidden: WEBHOOK_TEXT.insufficientScope,
  not_found: WEBHOOK_TEXT.triggerNotFound,
  payload_too_large: WEBHOOK_TEXT.tooLarge,
  invalid_request: WEBHOOK_TEXT.processingFailed,
  bad_request: WEBHOOK_TEXT.processingFailed,
  unsupported_media_type: WEBHOOK_TEXT.processingFailed,
  rate_limited: WEBHOOK_TEXT.rateLimited,
  unavailable: WEBHOOK_TEXT.unavailable,
  request_timeout: 'Request timeout',
  method_not_allowed: 'Method not allowed',
  internal_error: 'Internal error',
};

const CONTRACT_TEXTS = new Set<string>(Object.values(WEBHOOK_TEXT));

/**
 * `{"error": "<text>"}`, the documented text for the failure; a `detail` member says more
 * where the text alone would leave a sender guessing (which header, which limit).
 */
export function webhookErrorBody(e: AppError): string {
  const refused = refusalText.get(e);
  if (refused !== undefined) return JSON.stringify({ error: refused, detail: e.detail });
  const text = CONTRACT_TEXTS.has(e.detail) ? e.detail : (TEXT_BY_CODE[e.code] ?? e.title);
  const body: Record<string, string> = { error: text };
  if (!CONTRACT_TEXTS.has(e.detail) && e.status < 500 && e.code !== 'not_found' && e.code !== 'unauthorized' && e.code !== 'forbidden') body.detail = e.detail;
  return JSON.stringify(body);
}

export function renderWebhookError(e: AppError, _request: FastifyRequest, reply: FastifyReply): FastifyReply {
  return reply.code(e.status).type('application/json').send(webhookErrorBody(e));
}

const fail = (code: ErrorCode, text: string, opts: ConstructorParameters<typeof AppError>[2] = {}) => new AppError(code, text, opts);
const processingFailed = (detail: string) => new AppError('invalid_request', detail);

/**
 * 401s whose `error` keeps its documented text while `detail` says what the sender can fix
 * (which part of the signature failed, whether the bearer token expired): the one AppError,
 * with its documented text kept beside it for the renderer.
 */
const refusalText = new WeakMap<AppError, string>();

function refusal(text: string, reason: string, opts: ConstructorParameters<typeof AppError>[2] = {}): AppError {
  const e = new AppError('unauthorized', reason, opts);
  refusalText.set(e, text);
  return e;
}

/**
 * The inbound check of the admission that decided a delivery (the last one: a refusal is
 * decided again on a fresh lookup), handed to deps.inboundStatus once the delivery is answered.
 */
const inboundChecks = new WeakMap<FastifyRequest, InboundCheck>();

function noteCheck(deps: Deps, request: FastifyRequest, trigger: TriggerRow, failure: string | undefined): void {
  if (trigger.connector_id === null) return;
  inboundChecks.set(request, {
    workspaceId: trigger.workspace_id,
    connectorId: trigger.connector_id,
    status: trigger.connector_status,
    failure,
    at: deps.clock(),
  });
}

/** The connector's verdict on the delivery: the signer's message id when its scheme signs one. */
function verifyConnector(deps: Deps, trigger: TriggerRow, request: FastifyRequest, body: Buffer): SignedId | undefined {
  const mode = trigger.connector_auth_type;
  if (trigger.connector_id === null || mode === 'none') return undefined;
  if (mode !== 'api_key' && mode !== 'hmac') throw fail('invalid_request', WEBHOOK_TEXT.unsupportedAuth);
  const failed = (failure: string, e: AppError) => {
    noteCheck(deps, request, trigger, failure);
    return e;
  };
  const secret = trigger.connector_secret === null ? undefined : deps.connectors.inboundSecret(trigger.connector_secret);
  // A connector without a secret cannot vouch for anything.
  if (secret === undefined || secret === '') throw failed('no secret stored on the connector', fail('unauthorized', WEBHOOK_TEXT.unauthorized));
  const config = trigger.connector_config;
  if (mode === 'api_key') {
    const headerName = apiKeyHeaderOf(trigger);
    // A connector stored before the inbound rules with what they refuse cannot vouch for anything either.
    if (headerName === undefined || secretProblem('api_key', true, undefined, secret) !== undefined)
      throw failed('the connector breaks the inbound rules (secret or config.header_name)', unusable(request, trigger));
    if (!verifyApiKey(request.headers, secret, headerName)) {
      // Own properties only, as verifyApiKey reads them: a header named `constructor` reaches no prototype member.
      const why = Object.hasOwn(request.headers, headerName.toLowerCase()) ? 'key mismatch' : 'missing key header';
      throw failed(`${why} (${headerName})`, fail('unauthorized', WEBHOOK_TEXT.unauthorized));
    }
    noteCheck(deps, request, trigger, undefined);
    return undefined;
  }
  const scheme = isSignatureScheme(config?.signature_scheme) ? config.signature_scheme : DEFAULT_SIGNATURE_SCHEME;
  if (secretProblem('hmac', true, scheme, secret) !== undefined) throw failed('the connector breaks the inbound rules (secret)', unusable(request, trigger));
  const check = verifySignature(scheme, request.headers, body, secret, epochSeconds(deps.clock));
  if (!check.ok) {
    // The reason only, with the request id the logger adds: never the signature or the secret.
    request.log.info({ signature_scheme: scheme, reason: check.reason }, 'webhook signature refused');
    throw failed(`${check.reason} (${SIGNATURE_HEADER_NAMES[scheme]})`, refusal(WEBHOOK_TEXT.unauthorized, check.reason));
  }
  noteCheck(deps, request, trigger, undefined);
  return check.signedId;
}

/** The header an api_key connector reads its key from; undefined when its stored config.header_name breaks the inbound rules. */
function apiKeyHeaderOf(trigger: TriggerRow): string | undefined {
  const config = trigger.connector_config;
  const name = config !== null && Object.hasOwn(config, 'header_name') ? config.header_name : undefined;
  if (name === undefined || name === null) return DEFAULT_API_KEY_HEADER;
  return headerNameProblem(name, true) === undefined ? (name as string) : undefined;
}

/** 401 for a connector whose stored secret or header name the inbound rules refuse; the log says which connector, never the secret. */
function unusable(request: FastifyRequest, trigger: TriggerRow): AppError {
  request.log.warn({ connector_id: trigger.connector_id }, 'webhook refused: the inbound connector breaks the inbound rules (secret or header_name); fix it');
  return fail('unauthorized', WEBHOOK_TEXT.unauthorized);
}

/** The header an api_key connector reads its key from: never kept on the run, whatever its name. */
function secretHeadersOf(trigger: TriggerRow): string[] {
  if (trigger.connector_auth_type !== 'api_key') return [];
  const name = trigger.connector_config?.header_name;
  return [DEFAULT_API_KEY_HEADER, ...(typeof name === 'string' ? [name] : [])];
}

/** The workflow payload: the document's `payload` member when it has one, else the whole document. */
export function payloadOf(doc: unknown): unknown {
  return isObject(doc) && Object.hasOwn(doc, 'payload') ? doc.payload : doc;
}

/** What a delivery that was answered 202 was: its metrics' outcome (a refusal's is its error code). */
const acceptedAs = new WeakMap<FastifyRequest, 'accepted' | 'duplicate'>();

/**
 * Admissions by (account, trigger token hash) that led to an accepted delivery, per app
 * instance: a delivery they cover skips the lookup round trip. An entry is only a guess:
 * the accepting statement re-reads the lookup and inserts nothing unless its digest is
 * still the entry's (webhooks.sql.ts), so a revocation holds from its commit on, in every
 * process, with no message between them. A stale entry is dropped and the delivery decided
 * again from a fresh lookup, which answers exactly what it would have without the cache.
 * Past the bound the oldest goes first.
 */
const KEPT_ADMISSIONS = 10_000;

/** Fresh lookups a delivery may make when the rows keep changing under it before it is answered 503. */
const MAX_FRESH_LOOKUPS = 3;

// Stateless when not streaming: one decoder for every delivery.
const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });

async function lookup(deps: Deps, accountId: string, tokenHash: string): Promise<Admission> {
  try {
    return await loadAccountAndTrigger(deps.db, accountId, tokenHash);
  } catch (err) {
    // Whatever the database's trouble, the sender is told to come back: never a 500.
    throw fail('unavailable', WEBHOOK_TEXT.unavailable, { retryAfter: databaseUnavailable().retryAfter, cause: err });
  }
}

/**
 * The checks that read the account and the trigger, in the documented order: throws the
 * refusal, or returns the trigger and the connector's signed id. The same whether `found`
 * came from the cache or a fresh lookup.
 */
function admit(deps: Deps, request: FastifyRequest, claims: TokenClaims, found: Admission, orgDomain: string | undefined, body: Buffer) {
  // Only this admission's check counts: one decided on a stale lookup before it does not.
  inboundChecks.delete(request);
  const { account, trigger } = found;
  const standing = tokenStanding(claims, account);
  // The token itself no longer holds: account gone or deactivated, moved, or revoked since.
  if (standing === 'revoked' || !account) {
    throw refusal(WEBHOOK_TEXT.missingCredentials, 'the bearer token is invalid (its account changed or revoked its tokens)', {
      headers: { 'www-authenticate': 'Bearer error="invalid_token"' },
    });
  }
  if (!trigger || !trigger.workflow_active) throw fail('not_found', WEBHOOK_TEXT.triggerNotFound);
  if (orgDomain !== undefined && trigger.organization_domain.toLowerCase() !== orgDomain.toLowerCase()) throw fail('not_found', WEBHOOK_TEXT.triggerNotFound);
  if (
    trigger.service_account_id !== account.id ||
    trigger.organization_id !== account.organization_id ||
    trigger.workspace_id !== account.workspace_id ||
    standing !== 'ok'
  ) {
    throw fail('unauthorized', WEBHOOK_TEXT.unauthorized);
  }
  if (!permits(principalOf(claims, account), 'webhooks.ingest')) throw fail('forbidden', WEBHOOK_TEXT.insufficientScope);
  // A sender that cannot vouch for the delivery itself (the relay) asks that the trigger's connector does.
  if (request.headers[REQUIRE_VERIFICATION_HEADER] === 'true' && (trigger.connector_id === null || trigger.connector_auth_type === 'none'))
    throw fail('unauthorized', WEBHOOK_TEXT.unauthorized);
  return { trigger, signedId: verifyConnector(deps, trigger, request, body) };
}

async function ingest(
  deps: Deps,
  cache: BoundedMap<string, Admission>,
  request: FastifyRequest,
  reply: FastifyReply,
  token: string,
  orgDomain: string | undefined,
): Promise<FastifyReply> {
  const body = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
  let claims: TokenClaims;
  try {
    claims = verifyBearer(deps.signingKey, request.headers.authorization, epochSeconds(deps.clock));
  } catch {
    const problem = bearerProblem(deps.signingKey, request.headers.authorization, epochSeconds(deps.clock));
    // No token at all: the documented text alone says it.
    if (problem === undefined) throw fail('unauthorized', WEBHOOK_TEXT.missingCredentials, { headers: { 'www-authenticate': 'Bearer' } });
    throw refusal(WEBHOOK_TEXT.missingCredentials, problem, { headers: { 'www-authenticate': 'Bearer error="invalid_token"' } });
  }
  const tokenHash = sha256Hex(token);
  const cacheKey = `${claims.sub}:${tokenHash}`;
  let found = cache.get(cacheKey);
  let fresh = 0;
  if (found === undefined) {
    found = await lookup(deps, claims.sub, tokenHash);
    fresh++;
  }
  // Once per delivery, whichever admission accepts it: the window counts the delivery, the body is parsed once.
  let window: { triggerId: string; allowed: boolean; resetSeconds: number } | undefined;
  // Parsed again only when a fresh lookup finds the trigger taking other bodies than the one that parsed it.
  let stored: { accept: WebhookAccept; payloadJson: string } | undefined;
  for (;;) {
    let admitted: ReturnType<typeof admit>;
    let identity: ReturnType<typeof deliveryIdentity>;
    let now: number;
    try {
      admitted = admit(deps, request, claims, found, orgDomain, body);
      const triggerId = admitted.trigger.id;
      if (window?.triggerId !== triggerId) {
        const { max, windowSeconds } = deps.config.webhookRateLimit;
        const hit = await deps.limiter.hit(`wh:${triggerId}`, max, windowSeconds);
        reply.headers(rateLimitHeaders(hit, windowSeconds));
        window = { triggerId, allowed: hit.allowed, resetSeconds: hit.resetSeconds };
      }
      if (!window.allowed) throw fail('rate_limited', WEBHOOK_TEXT.rateLimited, { retryAfter: window.resetSeconds });
      const accept = admitted.trigger.accept;
      if (stored?.accept !== accept) stored = { accept, payloadJson: storedPayload(deps, request, body, accept) };
      now = deps.clock();
      const { signedId } = admitted;
      const signed = signedId === undefined ? undefined : { triggerId, ...signedId };
      identity = deliveryIdentity(request.headers, tokenHash, body, now, signed);
      if (identity.deliveryId.length > MAX_DELIVERY_ID_LENGTH)
        throw processingFailed(`The delivery id header is longer than ${MAX_DELIVERY_ID_LENGTH} characters`);
    } catch (err) {
      // Every refusal is decided on a fresh lookup, so that a stale admission never answers
      // anything a fresh one would not have (a revoked token's 401 before a body's 422).
      if (fresh > 0 || !(err instanceof AppError)) throw err;
      cache.delete(cacheKey);
      found = await lookup(deps, claims.sub, tokenHash);
      fresh++;
      continue;
    }
    const { trigger } = admitted;
    const headersJson = JSON.stringify(deliveryHeaders(request.headers, secretHeadersOf(trigger)));
    // A waiting run this delivery resumes (its wait_for_delivery matches) starts no run of its own.
    // The waits are read only when the accepting statement finds one on the trigger (`waits`),
    // or before a quota refusal (a delivery that resumes a run makes none, so it is not refused).
    let resume: { runId: string; deliveryJson: string } | undefined;
    let waitsChecked = false;
    // Past the workspace's waiting runs nothing is stored (no guard either), so the sender's
    // retry of this very delivery is accepted once the worker has drained some.
    if (!(await admitsRun(deps, trigger.workspace_id))) {
      resume = await waitingRunFor(deps, trigger, stored.payloadJson, identity.deliveryId, headersJson);
      waitsChecked = true;
      if (resume === undefined) {
        deps.metrics.quotaRefusal('waiting_runs', 'webhook');
        throw fail('rate_limited', waitingRunsRefusal(deps.waitingRuns.limit).detail, { retryAfter: WAITING_RUNS_RETRY_AFTER_SECONDS });
      }
    }

    // Computed for a resuming delivery too: if its run stopped waiting meanwhile, the delivery makes a run of its own.
    const concurrency = await deliveryConcurrency(deps, trigger, stored.payloadJson, identity.deliveryId, headersJson);
    const stateKey = await deliveryStateKey(deps, trigger, stored.payloadJson, identity.deliveryId, headersJson);
    let accepted: { current: boolean; runId: string | undefined; resumed?: true; waits?: true };
    const { payloadJson } = stored;
    const admittedState = found.state!;
    try {
      const accept = () =>
        acceptDelivery(
          deps.db,
          {
            id: uuidv7(),
            organizationId: trigger.organization_id,
            workspaceId: trigger.workspace_id,
            workflowId: trigger.workflow_id,
            workflowVersion: trigger.workflow_version,
            triggerKey: trigger.key,
            deliveryId: identity.deliveryId,
            payloadJson,
            deliveryHeadersJson: headersJson,
            maxAttempts: deps.config.runMaxAttempts,
            concurrency,
            stateKey,
            // The run's spans, in whichever process, continue the delivery's trace.
            traceparent: request.traceSpan?.traceparent ?? null,
            tracestate: request.traceSpan?.tracestate ?? null,
          },
          identity.key,
          new Date(now),
          new Date(now - deps.config.deliveryGuardDays * 86_400_000),
          identity.signedKey ?? null,
          { accountId: claims.sub, tokenHash, state: admittedState },
          resume,
          waitsChecked,
        );
      accepted = await accept();
      if (accepted.waits) {
        // Some run waits on this trigger: nothing was stored; decided again with the waits' matches.
        resume = await waitingRunFor(deps, trigger, stored.payloadJson, identity.deliveryId, headersJson);
        waitsChecked = true;
        accepted = await accept();
      }
    } catch (err) {
      if (err instanceof AppError) throw err;
      // A value the database refuses cannot succeed on a retry (the body checks should have
      // caught it); whatever else keeps the statement from committing, the delivery is not
      // accepted and the sender retries with the same delivery id.
      const refused = fromPgError(err);
      if (refused instanceof AppError && refused.code === 'invalid_request') throw processingFailed(refused.detail);
      throw fail('unavailable', WEBHOOK_TEXT.unavailable, { retryAfter: databaseUnavailable().retryAfter, cause: err });
    }
    if (!accepted.current) {
      // Something the admission read changed since (a revocation, or any edit): decide again
      // from the rows as they are now, which answers the refusal if there is one.
      cache.delete(cacheKey);
      if (fresh >= MAX_FRESH_LOOKUPS) throw fail('unavailable', WEBHOOK_TEXT.unavailable, { retryAfter: databaseUnavailable().retryAfter });
      found = await lookup(deps, claims.sub, tokenHash);
      fresh++;
      continue;
    }
    if (fresh > 0) cache.set(cacheKey, found);
    const runId = accepted.runId;
    request.traceSpan?.set({
      'tributary.workflow.id': trigger.workflow_id,
      'tributary.delivery.outcome': runId === undefined ? 'duplicate' : 'accepted',
      'tributary.run.id': runId,
    });
    if (runId === undefined) {
      acceptedAs.set(request, 'duplicate');
      return reply.code(202).send({ status: 'duplicate' });
    }
    acceptedAs.set(request, 'accepted');
    if (accepted.resumed) {
      request.traceSpan?.set({ 'tributary.delivery.resumed': true });
      wakeWorkers(deps);
      return reply.code(202).send({ status: 'accepted', workflow_run_id: runId, resumed: true });
    }
    deps.waitingRuns.queued(trigger.workspace_id);
    wakeWorkers(deps);
    return reply.code(202).send({ status: 'accepted', workflow_run_id: runId });
  }
}

/** The waiting run the delivery resumes, with the delivery as its run keeps it; undefined when none matches. */
async function waitingRunFor(
  deps: Deps,
  trigger: TriggerRow,
  payloadJson: string,
  deliveryId: string,
  headersJson: string,
): Promise<{ runId: string; deliveryJson: string } | undefined> {
  let runId: string | undefined;
  try {
    const headers = JSON.parse(headersJson) as Record<string, string>;
    runId = await matchWaitingRun(deps, {
      workspaceId: trigger.workspace_id,
      workflowId: trigger.workflow_id,
      triggerKey: trigger.key,
      payloadJson,
      delivery: expressionDelivery(deliveryId, headers),
    });
  } catch (err) {
    // The waits could not be read or matched: the sender retries, rather than the delivery starting a run a waiting one should have taken.
    throw fail('unavailable', WEBHOOK_TEXT.unavailable, { retryAfter: databaseUnavailable().retryAfter, cause: err });
  }
  if (runId === undefined) return undefined;
  return { runId, deliveryJson: `{"payload":${payloadJson},"id":${JSON.stringify(deliveryId)},"headers":${headersJson}}` };
}

/**
 * The run's concurrency key, over the payload and the delivery as its expressions will see
 * them. A key expression's own failure never refuses the delivery (the run goes under the
 * empty key, runs/concurrency.ts); only the expression pool's trouble does, as 503, and the
 * sender's retry is accepted once it is back.
 */
async function deliveryConcurrency(
  deps: Deps,
  trigger: TriggerRow,
  payloadJson: string,
  deliveryId: string,
  headersJson: string,
): Promise<RunConcurrency | null> {
  if (trigger.workflow_concurrency === null) return null;
  let found: RunConcurrency | null;
  try {
    const delivery = expressionDelivery(deliveryId, JSON.parse(headersJson) as Record<string, string>);
    found = await runConcurrency(deps.expressions, trigger.workspace_id, trigger.workflow_concurrency, JSON.parse(payloadJson), delivery);
  } catch (err) {
    throw fail('unavailable', WEBHOOK_TEXT.unavailable, { retryAfter: databaseUnavailable().retryAfter, cause: err });
  }
  if (found?.problem !== undefined)
    deps.log.warn(
      { workflow: trigger.workflow_id, trigger: trigger.key, error: found.problem },
      'concurrency key expression failed; the run is under the empty key',
    );
  return found;
}

/** The run's state key (runs/state-key.ts), as deliveryConcurrency computes its concurrency key. */
async function deliveryStateKey(deps: Deps, trigger: TriggerRow, payloadJson: string, deliveryId: string, headersJson: string): Promise<string | null> {
  if (trigger.workflow_state_key === null) return null;
  let found: RunStateKey;
  try {
    const delivery = expressionDelivery(deliveryId, JSON.parse(headersJson) as Record<string, string>);
    found = await runStateKey(deps.expressions, trigger.workspace_id, trigger.workflow_state_key, JSON.parse(payloadJson), delivery);
  } catch (err) {
    throw fail('unavailable', WEBHOOK_TEXT.unavailable, { retryAfter: databaseUnavailable().retryAfter, cause: err });
  }
  if (found.problem !== undefined)
    deps.log.warn(
      { workflow: trigger.workflow_id, trigger: trigger.key, error: found.problem },
      "state key expression failed; the run reads and writes the key ''",
    );
  return found.key;
}

async function admitsRun(deps: Deps, workspaceId: string): Promise<boolean> {
  try {
    return await deps.waitingRuns.admits(workspaceId);
  } catch (err) {
    throw fail('unavailable', WEBHOOK_TEXT.unavailable, { retryAfter: databaseUnavailable().retryAfter, cause: err });
  }
}

/** Without the trigger's opt-in, a form post is told which setting takes it. */
export const FORM_NOT_ACCEPTED = `The body is ${FORM_MEDIA_TYPE}; set accept: form on the trigger to take form posts`;

/**
 * The body's checks after the rate window (media type, UTF-8, JSON or form), and the
 * payload as the run stores it. A JSON body is never asked whether it is a form: the form
 * branch is taken only on a trigger with `accept: form` and a form media type.
 */
function storedPayload(deps: Deps, request: FastifyRequest, body: Buffer, accept: WebhookAccept): string {
  const type = request.headers['content-type'];
  let form = false;
  if (!isJsonMediaType(type)) {
    form = isFormMediaType(type);
    if (!form)
      throw processingFailed(accept === 'form' ? `Content-Type must be application/json or ${FORM_MEDIA_TYPE}` : 'Content-Type must be application/json');
    if (accept !== 'form') throw processingFailed(FORM_NOT_ACCEPTED);
  }
  if (body.length === 0) throw processingFailed(form ? 'The body is empty; send the form' : 'The body is empty; send a JSON document');
  let payload: unknown;
  try {
    const text = UTF8.decode(body);
    payload = form ? formPayload(text) : payloadOf(parseJson(text));
  } catch (err) {
    if (!(err instanceof AppError)) throw processingFailed('The body is not UTF-8 text');
    const at = err.source?.pointer;
    throw processingFailed(at === undefined ? err.detail : `${err.detail} (at ${at === '' ? 'the document root' : at})`);
  }
  // The run stores the payload as JSON, numbers written out (1e20 takes 21 digits): the
  // stored form stays within the body limit too.
  const payloadJson = JSON.stringify(payload);
  const storedBytes = Buffer.byteLength(payloadJson);
  if (storedBytes > deps.config.webhookMaxBodyBytes) {
    throw fail('payload_too_large', `The payload takes ${storedBytes} bytes as stored JSON (numbers written out); at most ${deps.config.webhookMaxBodyBytes}`);
  }
  return payloadJson;
}

export function webhookSurface(deps: Deps): SurfaceSpec {
  const limit = deps.config.webhookMaxBodyBytes;
  const tooLarge = () => fail('payload_too_large', WEBHOOK_TEXT.tooLarge);
  const cache = boundedMap<string, Admission>(KEPT_ADMISSIONS);
  return {
    prefix: WEBHOOK_PREFIX,
    render: renderWebhookError,
    renderRaw: (e) => ({ contentType: 'application/json', body: webhookErrorBody(e) }),
    setup(scope: FastifyInstance) {
      // Raw bytes whatever the media type: verification signs bytes, not a parsed document.
      scope.removeAllContentTypeParsers();
      scope.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: limit }, (_req, body, done) => done(null, body));
      // Every delivery counted once, by how it ended: accepted, duplicate, or its refusal's code.
      scope.addHook('onResponse', async (request, reply) => {
        deps.metrics.webhookDelivery(acceptedAs.get(request) ?? request.errorCode ?? `status_${reply.statusCode}`);
        // After the answer, outside the delivery's statement: usually nothing to write (inbound-status.ts).
        const check = inboundChecks.get(request);
        if (check !== undefined) deps.inboundStatus.observe(check);
      });
      // Before anything else, and before a byte of the body is read.
      scope.addHook('onRequest', async (request) => {
        const length = request.headers['content-length'];
        if (length !== undefined && Number(length) > limit) throw tooLarge();
      });
      const options = { bodyLimit: limit };
      scope.post('/api/v1/webhooks/:token', options, (request, reply) =>
        ingest(deps, cache, request, reply, (request.params as { token: string }).token, undefined),
      );
      scope.post('/api/v1/webhooks/:org_domain/:token', options, (request, reply) => {
        const { org_domain: domain, token } = request.params as { org_domain: string; token: string };
        reply.header('deprecation', 'true');
        reply.header('link', '</api/v1/webhooks/{token}>; rel="successor-version"');
        return ingest(deps, cache, request, reply, token, domain);
      });
    },
  };
}
