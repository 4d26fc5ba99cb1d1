import type { FastifyInstance } from 'fastify';
import type { Deps } from '../deps.ts';
import { registerReadRoutes, registerWriteRoutes } from '../http/jsonapi/routes.ts';
import { jsonApiSurface } from '../http/jsonapi/surface.ts';
import type { SurfaceSpec } from '../http/surface.ts';
import { RESOURCE_TYPES } from './types.ts';
import { dataModelType } from './data_models/resource.ts';
import { dataModelFieldType } from './data_model_fields/resource.ts';
import { createDataModel, dataModelInput, patchDataModel } from './data_models/service.ts';
import { createField, fieldInput, patchField } from './data_model_fields/service.ts';
import { externalConnectorType } from './external_connectors/resource.ts';
import { connectorInput, createConnector, patchConnector } from './external_connectors/service.ts';

/** The JSON:API surface with every resource type's routes. */
export function jsonApi(deps: Deps): SurfaceSpec {
  return jsonApiSurface(deps, (scope: FastifyInstance) => {
    for (const type of RESOURCE_TYPES.values()) registerReadRoutes(scope, deps, RESOURCE_TYPES, type);
    registerWriteRoutes(scope, deps, RESOURCE_TYPES, dataModelType, { input: dataModelInput, create: createDataModel, update: patchDataModel });
    registerWriteRoutes(scope, deps, RESOURCE_TYPES, dataModelFieldType, { input: fieldInput, create: createField, update: patchField });
    const connectorOptions = { key: deps.connectorKey, allowPrivateEgress: deps.config.allowPrivateEgress };
    registerWriteRoutes(scope, deps, RESOURCE_TYPES, externalConnectorType, {
      input: connectorInput,
      create: (db, principal, attrs) => createConnector(db, principal, attrs, connectorOptions),
      update: (db, principal, existing, attrs) => patchConnector(db, principal, existing, attrs, connectorOptions),
    });
  });
}
