import type { ResourceType } from '../resource.ts';
import { TIMESTAMPS } from '../common.ts';
import { visibleWorkspaces } from './workspaces.sql.ts';

export const workspaceType: ResourceType = {
  type: 'workspace',
  path: 'workspaces',
  table: 'workspaces',
  attributes: {
    name: { column: 'name', kind: 'string', filter: true, sort: true },
    organization_id: { column: 'organization_id', kind: 'uuid', filter: true },
    ...TIMESTAMPS,
  },
  relationships: {
    organization: { type: 'organization', kind: 'one', column: 'organization_id' },
  },
  visible: visibleWorkspaces,
};
