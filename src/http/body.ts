/**
 * Body parsing for every surface: JSON (and JSON:API) through parseJson (json.ts), which
 * refuses deep nesting before it allocates, strips prototype keys, and reports malformed
 * input as a 4xx; form bodies for the token endpoint.
 */
import type { FastifyInstance } from 'fastify';
import { AppError } from '../errors.ts';
import { parseJson } from '../json.ts';

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
