import type { ResourceType } from '../resource.ts';
import { visibleInWorkspace } from '../workspace-scope.sql.ts';

/**
 * The state documents of workflows (docs/workflows.md, "Workflow state"), read-only: a run's
 * set_state step writes one, a workflow's DELETE removes its own. None exists before the
 * first set_state of a workflow.
 */
export const workflowStateType: ResourceType = {
  type: 'workflow_state',
  path: 'workflow_states',
  table: 'workflow_state',
  attributes: {
    workflow_id: { column: 'workflow_id', kind: 'uuid', filter: true },
    key: { column: 'key', kind: 'string', filter: true },
    value: { column: 'value', kind: 'json' },
    updated_by_run_id: { column: 'updated_by_run_id', kind: 'uuid', nullable: true },
    inserted_at: { column: 'inserted_at', kind: 'datetime', filter: true, sort: true },
    updated_at: { column: 'updated_at', kind: 'datetime', filter: true, sort: true },
  },
  relationships: {
    workflow: { type: 'workflow', kind: 'one', column: 'workflow_id' },
  },
  visible: visibleInWorkspace('workflow_state'),
};
