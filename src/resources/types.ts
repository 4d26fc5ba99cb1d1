/**
 * Every public JSON:API type, in one static list: the routes, `include` and relationship
 * checks read this registry, so no type depends on another module having been imported.
 */
import { typeRegistry } from '../http/jsonapi/resource.ts';
import { organizationType } from './organizations/schema.ts';
import { orgMembershipType } from './org_memberships/schema.ts';
import { userType } from './users/schema.ts';
import { credentialType } from './credentials/schema.ts';
import { dashboardWidgetType } from './dashboard_widgets/schema.ts';
import { dataModelType } from './data_models/schema.ts';
import { dataModelFieldType } from './data_model_fields/schema.ts';
import { workspaceType } from './workspaces/schema.ts';

export const RESOURCE_TYPES = typeRegistry([organizationType, orgMembershipType, userType, credentialType, dashboardWidgetType, dataModelType, dataModelFieldType, workspaceType]);
