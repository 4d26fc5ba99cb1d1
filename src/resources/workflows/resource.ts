import type { ResourceType } from '../resource.ts';
import { TIMESTAMPS } from '../common.ts';
import { visibleInWorkspace } from '../workspace-scope.sql.ts';

/** Triggers show their id, key, type and account, never their token (it is kept only hashed). */
export const workflowType: ResourceType = {
  type: 'workflow',
  path: 'workflows',
  table: 'workflows',
  attributes: {
    name: { column: 'name', kind: 'string', filter: true, sort: true },
    description: { column: 'description', kind: 'string', nullable: true },
    is_active: { column: 'is_active', kind: 'boolean', filter: true, sort: true },
    version: { column: 'version', kind: 'integer', filter: true, sort: true },
    lock_version: { column: 'lock_version', kind: 'string' },
    steps: { column: 'steps', kind: 'json' },
    triggers: { column: 'triggers', kind: 'json' },
    organization_id: { column: 'organization_id', kind: 'uuid', filter: true },
    ...TIMESTAMPS,
  },
  relationships: {
    runs: { type: 'workflow_run', kind: 'many', foreignKey: 'workflow_id' },
  },
  visible: visibleInWorkspace('workflows'),
};
