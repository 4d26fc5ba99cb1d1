/**
 * The bearer token of one service account: exchanged on first use, renewed in the background
 * after 80% of its lifetime, and never exchanged twice at once however many calls wait for it.
 * The algorithm of the relay's token source (src/relay/token.ts), copied: this package does not
 * import the server.
 */

export interface Exchanged {
  token: string;
  expiresInSeconds: number;
}

export interface TokenSource {
  /** A token good for now; exchanges (once, shared) when there is none or it has run out. */
  get(): Promise<string>;
  /** A token other than `stale`, which the server refused (401). */
  renew(stale: string): Promise<string>;
  /** Exchanges started so far. */
  readonly exchanges: number;
}

const RENEW_AT = 0.8;
/** Renew at least this long before the end, so a call sent just before never carries a token that expires on its way. */
const MARGIN_MS = 30_000;

export function tokenSource(exchange: () => Promise<Exchanged>, clock: () => number): TokenSource {
  let current: { token: string; renewAt: number; expiresAt: number } | undefined;
  let inFlight: Promise<string> | undefined;
  let exchanges = 0;

  const start = (): Promise<string> =>
    (inFlight ??= (async () => {
      exchanges++;
      try {
        const { token, expiresInSeconds } = await exchange();
        const obtained = clock();
        const lifetimeMs = expiresInSeconds * 1000;
        const renewIn = Math.min(lifetimeMs * RENEW_AT, Math.max(0, lifetimeMs - MARGIN_MS));
        current = { token, expiresAt: obtained + lifetimeMs, renewAt: obtained + renewIn };
        return token;
      } finally {
        inFlight = undefined;
      }
    })());

  const get = async (): Promise<string> => {
    const now = clock();
    if (current && now < current.expiresAt) {
      // Still good: renewed in the background so no call waits for the exchange.
      if (now >= current.renewAt && !inFlight) start().catch(() => undefined);
      return current.token;
    }
    return inFlight ?? start();
  };

  return {
    get,
    async renew(stale) {
      if (current && current.token !== stale && clock() < current.expiresAt) return current.token;
      if (inFlight) return inFlight;
      if (current?.token === stale) current = undefined;
      return start();
    },
    get exchanges() {
      return exchanges;
    },
  };
}
