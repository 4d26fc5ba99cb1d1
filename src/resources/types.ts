/**
 * Every public JSON:API type, in one static list: the routes, `include` and relationship
 * checks read this registry, so no type depends on another module having been imported.
 */
import { typeRegistry } from './resource.ts';
import { organizationType } from './organizations/resource.ts';
import { orgMembershipType } from './org_memberships/resource.ts';
import { userType } from './users/resource.ts';
import { credentialType } from './credentials/resource.ts';
import { dashboardWidgetType } from './dashboard_widgets/resource.ts';
import { dataModelType } from './data_models/resource.ts';
import { dataModelFieldType } from './data_model_fields/resource.ts';
import { workspaceType } from './workspaces/resource.ts';
import { externalConnectorType } from './external_connectors/resource.ts';
import { workflowType } from './workflows/resource.ts';
import { workflowRunType } from './workflow_runs/resource.ts';
import { apiSpecType } from './api_specs/resource.ts';
import { workflowVersionType } from './workflow_versions/resource.ts';
import { workflowStateType } from './workflow_states/resource.ts';

export const RESOURCE_TYPES = typeRegistry([
  organizationType,
  orgMembershipType,
  userType,
  credentialType,
  dashboardWidgetType,
  dataModelType,
  dataModelFieldType,
  workspaceType,
  externalConnectorType,
  workflowType,
  workflowRunType,
  apiSpecType,
  workflowVersionType,
  workflowStateType,
]);
