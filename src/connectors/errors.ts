/**
 * What can go wrong when a connector calls out, in the four kinds a step and verification
 * tell apart: retried later (ProviderUnavailable) or not (the others). Each is a WorkFailure,
 * the worker's one vocabulary of retry-or-not.
 */
import { WorkFailure } from '../errors.ts';

/** Refused by the egress rules: never retried. */
export class EgressRefused extends WorkFailure {
  constructor(message: string) {
    super(message, { transient: false });
    this.name = 'EgressRefused';
  }
}

/** A problem with the connector's own settings: retrying does not help. */
export class ConnectorConfigError extends WorkFailure {
  constructor(message: string) {
    super(message, { transient: false });
    this.name = 'ConnectorConfigError';
  }
}

/** A step's request is wrong in a way a retry cannot fix. */
export class RequestProblem extends WorkFailure {
  constructor(message: string) {
    super(message, { transient: false });
    this.name = 'RequestProblem';
  }
}

/** A provider (or its token endpoint) that did not answer as it should, or could not be reached: a later attempt may succeed. It may say when to try again. */
export class ProviderUnavailable extends WorkFailure {
  constructor(message: string, retryAfterMs?: number) {
    super(message, { transient: true, retryAfterMs });
    this.name = 'ProviderUnavailable';
  }
}

// Transport failures: the provider could not be reached, or stopped answering.
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EAI_AGAIN',
  'ENOTFOUND',
  'ENETUNREACH',
  'EHOSTUNREACH',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'UND_ERR_SOCKET',
  'UND_ERR_CLOSED',
]);

/** A transport failure as a provider that could not be reached (retried), or undefined. */
export function networkFailure(err: unknown): ProviderUnavailable | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && NETWORK_CODES.has(code)) return new ProviderUnavailable(`The provider could not be reached (${code})`);
  if ((err as Error | null)?.name === 'TimeoutError') return new ProviderUnavailable('The provider did not answer in time');
  return undefined;
}
