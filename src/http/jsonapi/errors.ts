/** The JSON:API error document: what the JSON:API and admin surfaces answer on failure. */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { AppError } from '../../errors.ts';

export const JSONAPI_MEDIA_TYPE = 'application/vnd.api+json';

export function jsonApiErrorBody(e: AppError, id: string, status: number = e.status): string {
  const error: Record<string, unknown> = { id, status: String(status), code: e.code, title: e.title, detail: e.detail };
  if (e.source) error.source = e.source;
  if (e.meta) error.meta = e.meta;
  return JSON.stringify({ errors: [error], jsonapi: { version: '1.1' } });
}

export function renderJsonApiError(e: AppError, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  return reply.code(e.status).type(JSONAPI_MEDIA_TYPE).send(jsonApiErrorBody(e, request.id));
}
