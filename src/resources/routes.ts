import type { FastifyInstance } from 'fastify';
import type { Deps } from '../deps.ts';
import { registerReadRoutes, registerWriteRoutes } from '../http/jsonapi/routes.ts';
import { RESOURCE_TYPES } from './types.ts';
import { dataModelType } from './data_models/schema.ts';
import { dataModelFieldType } from './data_model_fields/schema.ts';
import { createDataModel, dataModelInput, patchDataModel } from './data_models/service.ts';
import { createField, fieldInput, patchField } from './data_model_fields/service.ts';

export function registerJsonApiRoutes(app: FastifyInstance, deps: Deps): void {
  for (const type of RESOURCE_TYPES.values()) registerReadRoutes(app, deps, RESOURCE_TYPES, type);
  registerWriteRoutes(app, deps, RESOURCE_TYPES, dataModelType, { input: dataModelInput, create: createDataModel, update: patchDataModel });
  registerWriteRoutes(app, deps, RESOURCE_TYPES, dataModelFieldType, { input: fieldInput, create: createField, update: patchField });
}
