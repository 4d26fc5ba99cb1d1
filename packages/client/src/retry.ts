/**
 * Retrying an answer the server asks us to come back for (429, 503) and a request that got no
 * answer: Retry-After when the server gives one, otherwise exponential backoff with full jitter;
 * never more than maxAttempts attempts nor longer than maxElapsedMs in all.
 */

export interface RetryPolicy {
  maxAttempts: number;
  maxElapsedMs: number;
  /** First backoff ceiling; doubles each attempt up to capDelayMs. */
  baseDelayMs: number;
  capDelayMs: number;
  clock: () => number;
  sleep: (ms: number) => Promise<void>;
  random: () => number;
}

export const RETRY_STATUSES: ReadonlySet<number> = new Set([429, 503]);

/** Retry-After in milliseconds: delta-seconds or an HTTP date; undefined when absent or unreadable. */
export function retryAfterMs(value: string | null, now: number): number | undefined {
  if (value === null || value.trim() === '') return undefined;
  if (/^\d+$/.test(value.trim())) return Number(value.trim()) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/** Full jitter: a uniform wait between 0 and the attempt's exponential ceiling. */
export function backoffMs(policy: RetryPolicy, attempt: number): number {
  const ceiling = Math.min(policy.capDelayMs, policy.baseDelayMs * 2 ** (attempt - 1));
  return Math.floor(policy.random() * ceiling);
}

export interface Outcome {
  /** The last answer, or undefined when the last attempt got none. */
  response: Response | undefined;
  /** The network error of the last attempt, when it got no answer. */
  error: unknown;
  attempts: number;
}

/**
 * Runs `attempt` until it gives an answer that is not 429/503, or the budget is spent. The
 * caller keeps every retry the same request (same body, same Idempotency-Key).
 */
export async function withRetries(policy: RetryPolicy, attempt: () => Promise<Response>): Promise<Outcome> {
  const started = policy.clock();
  for (let n = 1; ; n++) {
    let response: Response | undefined;
    let error: unknown;
    try {
      response = await attempt();
    } catch (err) {
      // The caller's own abort or timeout is an answer to respect, not a failure to retry.
      if (err instanceof Error && (err.name === 'AbortError' || err.name === 'TimeoutError')) throw err;
      error = err;
    }
    if (response && !RETRY_STATUSES.has(response.status)) return { response, error: undefined, attempts: n };
    if (n >= policy.maxAttempts) return { response, error, attempts: n };
    const asked = response ? retryAfterMs(response.headers.get('retry-after'), policy.clock()) : undefined;
    const wait = asked ?? backoffMs(policy, n);
    // A wait that would end past the budget cannot lead to an answer in time: give up now.
    if (policy.clock() - started + wait > policy.maxElapsedMs) return { response, error, attempts: n };
    await response?.body?.cancel().catch(() => undefined);
    await policy.sleep(wait);
  }
}
