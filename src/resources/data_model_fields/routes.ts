import type { FastifyInstance } from 'fastify';
import type { Deps } from '../../deps.ts';
import { API_PREFIX, buildDocument } from '../../http/jsonapi/document.ts';
import { readAttributes } from '../../http/jsonapi/input.ts';
import { findOr404, parseFor, sendDocument, writeOptions } from '../../http/jsonapi/routes.ts';
import { dataModelFieldType } from './schema.ts';
import { createField, fieldInput, patchField } from './service.ts';

export function registerFieldWrites(app: FastifyInstance, deps: Deps): void {
  const path = `${API_PREFIX}/data_model_fields`;
  app.post(path, writeOptions, async (request, reply) => {
    const q = parseFor(request, dataModelFieldType, false);
    const attrs = readAttributes(request.body, { type: 'data_model_field' }, fieldInput);
    const row = await createField(deps, request.principal!, attrs);
    reply.header('location', `${path}/${row.id}`);
    return sendDocument(reply, 201, await buildDocument(deps.db, request.principal!, dataModelFieldType, row, q));
  });
  app.patch(`${path}/:id`, writeOptions, async (request, reply) => {
    const q = parseFor(request, dataModelFieldType, false);
    const existing = await findOr404(deps, dataModelFieldType, request.principal!, (request.params as { id: string }).id);
    const attrs = readAttributes(request.body, { type: 'data_model_field', id: existing.id }, fieldInput);
    const row = await patchField(deps, request.principal!, existing, attrs);
    return sendDocument(reply, 200, await buildDocument(deps.db, request.principal!, dataModelFieldType, row, q));
  });
}
