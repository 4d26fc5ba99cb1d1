/** The one error every call of the client rejects with: what the server answered, or why there was no answer. */

export interface TributaryErrorInit {
  status: number;
  code: string;
  detail?: string | undefined;
  pointer?: string | undefined;
  requestId?: string | undefined;
  /** Attempts made before giving up (1 when the answer was not retried). */
  attempts?: number | undefined;
  cause?: unknown;
}

export class TributaryError extends Error {
  /** HTTP status; 0 when no answer arrived (connection refused, reset, timeout). */
  readonly status: number;
  /** The JSON:API error code (`invalid_request`...), the webhook error text (`missing_credentials`, `Rate limit exceeded`...), the OAuth error or a GraphQL extensions.code. */
  readonly code: string;
  readonly detail: string | undefined;
  /** JSON Pointer into the request document of the field at fault (source.pointer), or the query parameter. */
  readonly pointer: string | undefined;
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
    this.requestId = init.requestId;
    this.attempts = init.attempts ?? 1;
  }
}

/** The error of a failed answer, whatever surface it came from (JSON:API, OAuth, webhook, GraphQL). */
export function errorFromAnswer(status: number, text: string, requestId: string | undefined, attempts: number): TributaryError {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    return new TributaryError({ status, code: 'http_error', detail: text.slice(0, 200) || undefined, requestId, attempts });
  }
  const d = (doc && typeof doc === 'object' ? doc : {}) as Record<string, unknown>;
  if (Array.isArray(d.errors) && d.errors.length > 0) {
    const e = (d.errors[0] ?? {}) as Record<string, unknown>;
    const source = (e.source ?? {}) as Record<string, unknown>;
    const ext = (e.extensions ?? {}) as Record<string, unknown>;
    const code = typeof e.code === 'string' ? e.code : typeof ext.code === 'string' ? ext.code : 'http_error';
    const detail = typeof e.detail === 'string' ? e.detail : typeof e.message === 'string' ? e.message : undefined;
    const pointer = typeof source.pointer === 'string' ? source.pointer : typeof source.parameter === 'string' ? source.parameter : undefined;
    return new TributaryError({ status, code, detail, pointer, requestId, attempts });
  }
  if (typeof d.error === 'string') {
    const detail = typeof d.error_description === 'string' ? d.error_description : undefined;
    return new TributaryError({ status, code: d.error, detail, requestId, attempts });
  }
  return new TributaryError({ status, code: 'http_error', requestId, attempts });
}
