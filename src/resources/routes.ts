import type { FastifyInstance } from 'fastify';
import type { Deps } from '../deps.ts';
import { registerReadRoutes, registerWriteRoutes } from '../http/jsonapi/routes.ts';
import { organizationType } from './organizations/schema.ts';
import { orgMembershipType } from './org_memberships/schema.ts';
import { userType } from './users/schema.ts';
import { credentialType } from './credentials/schema.ts';
import { dashboardWidgetType } from './dashboard_widgets/schema.ts';
import { dataModelType } from './data_models/schema.ts';
import { dataModelFieldType } from './data_model_fields/schema.ts';
import { workspaceType } from './workspaces/schema.ts';
import { createDataModel, dataModelInput, patchDataModel } from './data_models/service.ts';
import { createField, fieldInput, patchField } from './data_model_fields/service.ts';

export const READABLE_TYPES = [organizationType, orgMembershipType, userType, credentialType, dashboardWidgetType, dataModelType, dataModelFieldType, workspaceType];

export function registerJsonApiRoutes(app: FastifyInstance, deps: Deps): void {
  for (const type of READABLE_TYPES) registerReadRoutes(app, deps, type);
  registerWriteRoutes(app, deps, dataModelType, { input: dataModelInput, create: createDataModel, update: patchDataModel });
  registerWriteRoutes(app, deps, dataModelFieldType, { input: fieldInput, create: createField, update: patchField });
}
