import type { ResourceType } from '../resource.ts';
import { visibleInWorkspace } from '../workspace-scope.sql.ts';

/**
 * The steps of every saved version of a workflow, read-only: a save that makes a new version
 * adds one, a save that keeps the version replaces its steps and saver. saved_by is the
 * membership whose save wrote them (null: saved before it was recorded).
 */
export const workflowVersionType: ResourceType = {
  type: 'workflow_version',
  path: 'workflow_versions',
  table: 'workflow_versions',
  attributes: {
    workflow_id: { column: 'workflow_id', kind: 'uuid', filter: true },
    version: { column: 'version', kind: 'integer', filter: true, sort: true },
    steps: { column: 'steps', kind: 'json' },
    on_failure: { column: 'on_failure', kind: 'json' },
    // {key, limit} the version's runs were enqueued under; null: none (docs/workflows.md, "Concurrency").
    concurrency: { column: 'concurrency', kind: 'json', nullable: true },
    // The state key expression the version's runs were enqueued under; null: none (docs/workflows.md, "Workflow state").
    state_key: { column: 'state_key', kind: 'string', nullable: true },
    saved_by: { column: 'saved_by_membership_id', kind: 'uuid', filter: true, nullable: true },
    inserted_at: { column: 'inserted_at', kind: 'datetime', filter: true, sort: true },
  },
  relationships: {
    workflow: { type: 'workflow', kind: 'one', column: 'workflow_id' },
  },
  visible: visibleInWorkspace('workflow_versions'),
};
