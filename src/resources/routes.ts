import type { FastifyInstance } from 'fastify';
import type { Deps } from '../deps.ts';
import { registerReadRoutes } from '../http/jsonapi/routes.ts';
import { organizationType } from './organizations/schema.ts';
import { orgMembershipType } from './org_memberships/schema.ts';
import { userType } from './users/schema.ts';
import { credentialType } from './credentials/schema.ts';
import { dashboardWidgetType } from './dashboard_widgets/schema.ts';
import { dataModelType } from './data_models/schema.ts';
import { dataModelFieldType } from './data_model_fields/schema.ts';
import { registerDataModelWrites } from './data_models/routes.ts';
import { registerFieldWrites } from './data_model_fields/routes.ts';

export const READABLE_TYPES = [organizationType, orgMembershipType, userType, credentialType, dashboardWidgetType, dataModelType, dataModelFieldType];

export function registerJsonApiRoutes(app: FastifyInstance, deps: Deps): void {
  for (const type of READABLE_TYPES) registerReadRoutes(app, deps, type);
  registerDataModelWrites(app, deps);
  registerFieldWrites(app, deps);
}
