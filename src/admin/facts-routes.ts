/**
 * Admin API of the fact store: POST /admin/v1/facts/import?workspace_id=..&data_model=SLUG
 * with an NDJSON body (Content-Type application/x-ndjson), answered with
 * {"data": {lines, written, duplicates, rejected, errors: [{line, pointer?, detail}], errors_omitted}}.
 */
import type { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Deps } from '../deps.ts';
import { AppError } from '../errors.ts';
import { IMPORT_BATCH, importFacts, resolveImportTarget } from '../facts/import.ts';
import { ndjsonLines } from '../facts/ndjson.ts';
import { LINES_STORED_HEADER, PROGRESS_REQUEST_HEADER, PROGRESS_REQUEST_VALUE } from '../facts/import-progress.ts';

export const NDJSON = 'application/x-ndjson';
/**
 * The body is read as a stream and never buffered, so this is a ceiling on one upload
 * rather than on memory; 2 GiB holds a few million facts of ordinary size.
 */
export const IMPORT_BODY_LIMIT = 2 * 1024 * 1024 * 1024;

async function requireNdjson(request: FastifyRequest): Promise<void> {
  // Checked before parsing: any other type would reach a buffering parser with this
  // route's 2 GiB limit.
  const type = request.headers['content-type']?.split(';')[0]?.trim().toLowerCase();
  if (type !== NDJSON) throw new AppError('unsupported_media_type', `Content-Type must be ${NDJSON}`, { source: { header: 'Content-Type' } });
}

/**
 * Tells a client that asked (`Tributary-Progress: lines-stored`) how many lines are stored,
 * as an interim 102 answer: if the connection is then cut (a shutdown past its grace), the
 * client knows where the import stopped. Only before the answer starts, and only on HTTP/1.1,
 * where a client must accept 1xx answers.
 */
function progressSender(request: FastifyRequest, reply: FastifyReply): ((linesDone: number) => void) | undefined {
  if (request.headers[PROGRESS_REQUEST_HEADER] !== PROGRESS_REQUEST_VALUE || request.raw.httpVersion !== '1.1') return undefined;
  return (linesDone) => {
    const socket = request.raw.socket as { writable?: boolean; write?: (s: string) => unknown } | null;
    if (reply.raw.headersSent || !socket?.writable || typeof socket.write !== 'function') return;
    socket.write(`HTTP/1.1 102 Processing\r\n${LINES_STORED_HEADER}: ${linesDone}\r\n\r\n`);
  };
}

export function registerFactsAdminRoutes(app: FastifyInstance, deps: Deps): void {
  // An encapsulated scope, so the stream-through parser exists for this route only.
  app.register(async (scope) => {
    scope.addContentTypeParser(NDJSON, (_request, payload, done) => done(null, payload));
    scope.post(
      '/admin/v1/facts/import',
      { config: { bodyTimeout: 'idle' }, bodyLimit: IMPORT_BODY_LIMIT, onRequest: requireNdjson },
      async (request: FastifyRequest, reply: FastifyReply) => {
        const query = request.query as Record<string, unknown>;
        const target = await resolveImportTarget(deps.db, { workspaceId: query.workspace_id, dataModelSlug: query.data_model });
        const body = request.body as Readable | undefined;
        const lines = body ? ndjsonLines(body) : [];
        // Batches written before a client went away stay written; a resend counts them as duplicates.
        const interrupted = () => new AppError('bad_request', 'The upload ended before the end of the body');
        let result;
        try {
          result = await importFacts(deps.bulkDb, target, lines, {
            batching: IMPORT_BATCH[deps.engine],
            onBatch: progressSender(request, reply),
            metrics: deps.metrics,
          });
        } catch (err) {
          // A client that goes away mid-upload is not a server failure.
          if (!request.raw.complete && (err as { code?: unknown }).code === 'ECONNRESET') throw interrupted();
          throw err;
        }
        if (!request.raw.complete) throw interrupted();
        request.log.info(
          {
            facts_import: {
              data_model_id: target.model.id,
              lines: result.lines,
              written: result.written,
              duplicates: result.duplicates,
              rejected: result.rejected,
            },
          },
          'facts import done',
        );
        return reply
          .code(200)
          .type('application/json')
          .send(JSON.stringify({ data: result }));
      },
    );
  });
}
