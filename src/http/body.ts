/**
 * Body parsing for every surface: JSON (and JSON:API) through one parser that refuses
 * deep nesting before it allocates, strips prototype keys, and reports malformed input
 * as a 4xx; form bodies for the token endpoint.
 */
import { jsonDepthExceeds, MAX_JSON_DEPTH, mayHoldUnstorableText, UNSTORABLE_TEXT, unstorableTextAt } from '../json.ts';
import type { FastifyInstance } from 'fastify';
import { AppError, invalidAt } from '../errors.ts';

export function parseJson(text: string): unknown {
  if (jsonDepthExceeds(text, MAX_JSON_DEPTH)) {
    throw new AppError('invalid_request', `The JSON document is nested deeper than ${MAX_JSON_DEPTH} levels`);
  }
  let value: unknown;
  try {
    // The reviver costs a call per value; a text that cannot spell those keys (no escapes,
    // neither name) does without it.
    value = mayHoldPrototypeKeys(text) ? JSON.parse(text, stripPrototypeKeys) : JSON.parse(text);
  } catch {
    throw new AppError('bad_request', 'The request body is not valid JSON');
  }
  // Refused here, where JSON enters, rather than by the database wherever it is stored
  // (a 503 on the webhook path, "malformed" without a place elsewhere).
  const at = mayHoldUnstorableText(text) ? unstorableTextAt(value) : undefined;
  if (at !== undefined) throw invalidAt(at, UNSTORABLE_TEXT);
  return value;
}

function mayHoldPrototypeKeys(text: string): boolean {
  return text.includes('__proto__') || text.includes('constructor') || text.includes('\\u');
}

// A reviver returning undefined deletes the member, so these keys never reach an object.
function stripPrototypeKeys(key: string, value: unknown): unknown {
  return key === '__proto__' || key === 'constructor' ? undefined : value;
}

export function registerBodyParsers(app: FastifyInstance): void {
  app.removeAllContentTypeParsers();
  const json = (_req: unknown, body: string, done: (err: Error | null, value?: unknown) => void) => {
    if (body.length === 0) return done(new AppError('bad_request', 'The request body is empty'));
    try {
      done(null, parseJson(body));
    } catch (err) {
      done(err as Error);
    }
  };
  app.addContentTypeParser(['application/json', 'application/vnd.api+json'], { parseAs: 'string' }, json);
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_req, body, done) => {
    const params = new URLSearchParams(body as string);
    const out: Record<string, string | string[]> = Object.create(null);
    for (const [k, v] of params) {
      const prev = out[k];
      out[k] = prev === undefined ? v : Array.isArray(prev) ? [...prev, v] : [prev, v];
    }
    done(null, out);
  });
  // Any other media type is refused by the surface's own negotiation before parsing;
  // reaching here means a surface without one, so keep the bytes and let it decide.
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));
}
