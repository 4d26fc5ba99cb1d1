import type { ResourceType } from '../resource.ts';
import { TIMESTAMPS } from '../common.ts';
import { visibleInWorkspace } from '../workspace-scope.sql.ts';
import { presentRun } from '../../runs/run-record.ts';

export const RUN_STATUSES = ['queued', 'running', 'retrying', 'waiting', 'succeeded', 'failed', 'cancelled'] as const;
export const RUN_OUTCOMES = ['completed', 'stopped_at_condition', 'failed', 'dead_letter', 'cancelled'] as const;

export const workflowRunType: ResourceType = {
  type: 'workflow_run',
  path: 'workflow_runs',
  table: 'workflow_runs',
  attributes: {
    status: { column: 'status', kind: 'enum', values: RUN_STATUSES, filter: true, sort: true },
    attempt: { column: 'attempt', kind: 'integer', filter: true, sort: true },
    max_attempts: { column: 'max_attempts', kind: 'integer' },
    workflow_id: { column: 'workflow_id', kind: 'uuid', filter: true },
    workflow_version: { column: 'workflow_version', kind: 'integer', filter: true, sort: true },
    trigger_key: { column: 'trigger_key', kind: 'string', filter: true, sort: true, nullable: true },
    delivery_id: { column: 'delivery_id', kind: 'string', filter: true, nullable: true },
    payload: { column: 'payload', kind: 'json' },
    // The delivery's headers, secrets redacted (triggers/delivery-headers.ts); null for a schedule's run.
    delivery_headers: { column: 'delivery_headers', kind: 'json', nullable: true },
    // Derived from the payload by presentRun: a payload over the shown size is a preview.
    payload_truncated: { column: 'payload', kind: 'boolean' },
    payload_bytes: { column: 'payload', kind: 'integer' },
    steps: { column: 'steps', kind: 'json' },
    error: { column: 'error', kind: 'string', nullable: true },
    // The key computed when the run was enqueued and the limit of then; null: not limited (docs/workflows.md, "Concurrency").
    concurrency_key: { column: 'concurrency_key', kind: 'string', filter: true, nullable: true },
    concurrency_limit: { column: 'concurrency_limit', kind: 'integer', nullable: true },
    // The key of the state document the run reads and writes, computed when it was enqueued; null: '' (docs/workflows.md, "Workflow state").
    state_key: { column: 'state_key', kind: 'string', filter: true, nullable: true },
    replay_of: { column: 'replay_of', kind: 'uuid', filter: true, nullable: true },
    outcome: { column: 'outcome', kind: 'enum', values: RUN_OUTCOMES, filter: true, sort: true, nullable: true },
    facts_written: { column: 'facts_written', kind: 'integer', filter: true, sort: true },
    // The trace the run's spans belong to (docs/tracing.md), from its traceparent by presentRun; null when tracing was off.
    trace_id: { column: 'traceparent', kind: 'string', nullable: true },
    // While the run is waiting (a delay, wait_until or wait_for_delivery): when it resumes at the latest.
    resume_at: { column: 'resume_at', kind: 'datetime', filter: true, sort: true, nullable: true },
    started_at: { column: 'started_at', kind: 'datetime', filter: true, sort: true, nullable: true },
    finished_at: { column: 'finished_at', kind: 'datetime', filter: true, sort: true, nullable: true },
    ...TIMESTAMPS,
  },
  relationships: {
    workflow: { type: 'workflow', kind: 'one', column: 'workflow_id' },
  },
  visible: visibleInWorkspace('workflow_runs'),
  // Every answer's run within fixed sizes, so a page of them is bounded (docs/workflows.md, "Sizes").
  present: presentRun,
};
