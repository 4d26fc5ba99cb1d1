import type { ResourceType } from '../resource.ts';
import { TIMESTAMPS } from '../common.ts';
import { visibleUndeletedInWorkspace } from '../workspace-scope.sql.ts';
import { nextTick } from '../../triggers/schedule.ts';
import type { WorkflowTriggerView } from '../../db/tables.ts';
import { DEFAULT_WEBHOOK_ACCEPT } from '../../workflows/definition.ts';

/**
 * A schedule shows when it fires next, at the read's instant: never while its workflow is
 * inactive. A webhook saved before triggers had `accept` shows the default it has.
 */
function presentWorkflow(row: Record<string, any>, now: Date): Record<string, unknown> {
  if (!Array.isArray(row.triggers)) return {};
  const triggers = (row.triggers as WorkflowTriggerView[]).map((t) =>
    t.type === 'schedule'
      ? { ...t, next_fire_at: row.is_active ? (nextTick(t, now)?.toISOString() ?? null) : null }
      : { ...t, accept: t.accept ?? DEFAULT_WEBHOOK_ACCEPT },
  );
  return { triggers };
}

/** Triggers show their id, key, type and account or schedule, never their token (it is kept only hashed). */
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
    on_failure: { column: 'on_failure', kind: 'json' },
    triggers: { column: 'triggers', kind: 'json' },
    // {key, limit}: at most limit runs of one key execute at once; null: no limit (docs/workflows.md, "Concurrency").
    concurrency: { column: 'concurrency', kind: 'json', nullable: true },
    // The expression whose value names the state document a run reads and writes; null: one document (docs/workflows.md, "Workflow state").
    state_key: { column: 'state_key', kind: 'string', nullable: true },
    organization_id: { column: 'organization_id', kind: 'uuid', filter: true },
    ...TIMESTAMPS,
  },
  relationships: {
    runs: { type: 'workflow_run', kind: 'many', foreignKey: 'workflow_id' },
  },
  // A deleted workflow (deleted_at set) is kept for its runs and hidden from every read.
  visible: visibleUndeletedInWorkspace('workflows'),
  present: presentWorkflow,
  deletable: true,
};
