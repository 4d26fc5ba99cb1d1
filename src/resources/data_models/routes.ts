import type { FastifyInstance } from 'fastify';
import type { Deps } from '../../deps.ts';
import { API_PREFIX, buildDocument } from '../../http/jsonapi/document.ts';
import { readAttributes } from '../../http/jsonapi/input.ts';
import { findOr404, parseFor, sendDocument, writeOptions } from '../../http/jsonapi/routes.ts';
import { dataModelType } from './schema.ts';
import { createDataModel, dataModelInput, patchDataModel } from './service.ts';

export function registerDataModelWrites(app: FastifyInstance, deps: Deps): void {
  const path = `${API_PREFIX}/data_models`;
  app.post(path, writeOptions, async (request, reply) => {
    const q = parseFor(request, dataModelType, false);
    const attrs = readAttributes(request.body, { type: 'data_model' }, dataModelInput);
    const row = await createDataModel(deps, request.principal!, attrs);
    reply.header('location', `${path}/${row.id}`);
    return sendDocument(reply, 201, await buildDocument(deps.db, request.principal!, dataModelType, row, q));
  });
  app.patch(`${path}/:id`, writeOptions, async (request, reply) => {
    const q = parseFor(request, dataModelType, false);
    const existing = await findOr404(deps, dataModelType, request.principal!, (request.params as { id: string }).id);
    const attrs = readAttributes(request.body, { type: 'data_model', id: existing.id }, dataModelInput);
    const row = await patchDataModel(deps, request.principal!, existing.id, attrs);
    return sendDocument(reply, 200, await buildDocument(deps.db, request.principal!, dataModelType, row, q));
  });
}
