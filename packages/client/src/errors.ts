/** The one error every call of the client rejects with: what the server answered, or why there was no answer. */

export interface TributaryErrorInit {
  status: number;
  code: string;
  detail?: string | undefined;
  pointer?: string | undefined;
  title?: string | undefined;
  source?: ErrorSource | undefined;
  meta?: Record<string, unknown> | undefined;
  requestId?: string | undefined;
  /** The token exchange failed, not the call itself. */
  tokenExchange?: boolean | undefined;
  /** Attempts made before giving up (1 when the answer was not retried). */
  attempts?: number | undefined;
  cause?: unknown;
}

/** A JSON:API error's `source` member: the field (JSON Pointer), query parameter or header at fault. */
export interface ErrorSource {
  pointer?: string;
  parameter?: string;
  header?: string;
}

export class TributaryError extends Error {
  /** HTTP status; 0 when no answer arrived (connection refused, reset, timeout). */
  readonly status: number;
  /** The JSON:API error code (`invalid_request`...), the webhook error text (`missing_credentials`, `Rate limit exceeded`...), the OAuth error or a GraphQL extensions.code. */
  readonly code: string;
  readonly detail: string | undefined;
  /** JSON Pointer into the request document of the field at fault (source.pointer), or the query parameter. */
  readonly pointer: string | undefined;
  /** The JSON:API error's title: the same for every error of its code (detail tells this one). */
  readonly title: string | undefined;
  /** The JSON:API error's source as the server gave it ({pointer}, {parameter} or {header}). */
  readonly source: ErrorSource | undefined;
  /** The JSON:API error's meta (a workflow_file's problem: member, line, column). */
  readonly meta: Record<string, unknown> | undefined;
  /**
   * True when the token exchange failed (refused credentials or scope, or the token endpoint
   * did not answer), not the call itself: fix the client's configuration rather than the call.
   */
  readonly tokenExchange: boolean;
  /** The server's x-request-id of the failed answer: quote it when asking about the failure. */
  readonly requestId: string | undefined;
  readonly attempts: number;

  constructor(init: TributaryErrorInit) {
    super(`${init.status === 0 ? 'no answer' : `HTTP ${init.status}`} ${init.code}${init.detail ? `: ${init.detail}` : ''}`, { cause: init.cause });
    this.name = 'TributaryError';
    this.status = init.status;
    this.code = init.code;
    this.detail = init.detail;
    this.pointer = init.pointer;
    this.title = init.title;
    this.source = init.source;
    this.meta = init.meta;
    this.tokenExchange = init.tokenExchange ?? false;
    this.requestId = init.requestId;
    this.attempts = init.attempts ?? 1;
  }
}

/** The error of a failed answer, whatever surface it came from (JSON:API, OAuth, webhook, GraphQL). */
export function errorFromAnswer(status: number, text: string, requestId: string | undefined, attempts: number, tokenExchange = false): TributaryError {
  const common = { status, requestId, attempts, tokenExchange };
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    return new TributaryError({ ...common, code: 'http_error', detail: text.slice(0, 200) || undefined });
  }
  const d = (doc && typeof doc === 'object' ? doc : {}) as Record<string, unknown>;
  if (Array.isArray(d.errors) && d.errors.length > 0) {
    const e = (d.errors[0] ?? {}) as Record<string, unknown>;
    const ext = (e.extensions ?? {}) as Record<string, unknown>;
    const code = typeof e.code === 'string' ? e.code : typeof ext.code === 'string' ? ext.code : 'http_error';
    const detail = typeof e.detail === 'string' ? e.detail : typeof e.message === 'string' ? e.message : undefined;
    const title = typeof e.title === 'string' ? e.title : undefined;
    const source = sourceOf(e.source);
    const pointer = source?.pointer ?? source?.parameter;
    const meta = e.meta && typeof e.meta === 'object' && !Array.isArray(e.meta) ? (e.meta as Record<string, unknown>) : undefined;
    return new TributaryError({ ...common, code, detail, title, source, pointer, meta });
  }
  if (typeof d.error === 'string') {
    // OAuth says more in error_description, the webhook surface in detail; a webhook error
    // without either is its documented text alone (`Unauthorized`), which is the detail too.
    const said = [d.error_description, d.detail].find((v): v is string => typeof v === 'string' && v !== '');
    return new TributaryError({ ...common, code: d.error, detail: said ?? d.error });
  }
  return new TributaryError({ ...common, code: 'http_error' });
}

/** The string members of a JSON:API error's source that the specification names; undefined when there are none. */
function sourceOf(value: unknown): ErrorSource | undefined {
  if (!value || typeof value !== 'object') return undefined;
  const out: ErrorSource = {};
  for (const k of ['pointer', 'parameter', 'header'] as const) {
    const v = (value as Record<string, unknown>)[k];
    if (typeof v === 'string') out[k] = v;
  }
  return Object.keys(out).length > 0 ? out : undefined;
}
