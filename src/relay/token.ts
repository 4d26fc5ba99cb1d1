/**
 * The relay's bearer token: exchanged with its one service account's client credentials,
 * renewed before it expires, and never exchanged twice at once however many deliveries
 * ask for it. Neither the token nor the secret is ever logged or put in an error message.
 */

/** What one exchange gives: the token and its lifetime in seconds (`expires_in`). */
export interface Exchanged {
  token: string;
  expiresInSeconds: number;
}

/** Why there is no token to send: the service did not answer, or refused the account. */
export class ExchangeError extends Error {
  /** The account itself was refused (invalid_client, ...): retrying soon does not help. */
  readonly refused: boolean;
  constructor(message: string, refused: boolean) {
    super(message);
    this.name = 'ExchangeError';
    this.refused = refused;
  }
}

export interface TokenSource {
  /** A token good for now; exchanges (once, shared) when there is none or it has run out. */
  get(): Promise<string>;
  /** A token other than `stale`, which the service no longer takes (401 missing_credentials). */
  renew(stale: string): Promise<string>;
  /** Exchanges made so far (successful or not). */
  readonly exchanges: number;
}

/**
 * When to exchange again: after RENEW_AT of the lifetime, and at least MARGIN_MS before the
 * end, so a delivery sent just before never carries a token that expires on its way.
 */
const RENEW_AT = 0.8;
const MARGIN_MS = 30_000;
/** After a failed exchange, deliveries fail at once for this long rather than each trying again. */
const FAILED_PAUSE_MS = 1000;

export function tokenSource(exchange: () => Promise<Exchanged>, clock: () => number = Date.now): TokenSource {
  let current: { token: string; renewAt: number; expiresAt: number } | undefined;
  let inFlight: Promise<string> | undefined;
  let failure: { error: Error; until: number } | undefined;
  let exchanges = 0;

  const start = (): Promise<string> =>
    (inFlight ??= (async () => {
      exchanges++;
      try {
        const { token, expiresInSeconds } = await exchange();
        const obtained = clock();
        const lifetimeMs = expiresInSeconds * 1000;
        current = { token, expiresAt: obtained + lifetimeMs, renewAt: obtained + Math.min(lifetimeMs * RENEW_AT, Math.max(0, lifetimeMs - MARGIN_MS)) };
        failure = undefined;
        return token;
      } catch (err) {
        failure = { error: err instanceof Error ? err : new Error(String(err)), until: clock() + FAILED_PAUSE_MS };
        throw failure.error;
      } finally {
        inFlight = undefined;
      }
    })());

  const get = async (): Promise<string> => {
    const now = clock();
    if (current && now < current.expiresAt) {
      // Still good: renewed in the background, so no delivery waits for the exchange.
      if (now >= current.renewAt && !inFlight && !(failure && now < failure.until)) start().catch(() => undefined);
      return current.token;
    }
    if (inFlight) return inFlight;
    if (failure && now < failure.until) throw failure.error;
    return start();
  };

  return {
    get,
    async renew(stale) {
      if (current && current.token !== stale && clock() < current.expiresAt) return current.token;
      if (current?.token === stale) current = undefined;
      return get();
    },
    get exchanges() {
      return exchanges;
    },
  };
}
