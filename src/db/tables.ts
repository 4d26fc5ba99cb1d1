/**
 * The database as Kysely sees it: one row type per table.
 * Ids are UUIDv7 made by the service (src/ids.ts); timestamps are timestamptz.
 */
import type { GeneratedAlways, ColumnType, Generated } from 'kysely';
import type { Operation, SpecChanges } from '../openapi/normalize.ts';

type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;
/** jsonb goes in as JSON text (both drivers pass it through unchanged) and comes out parsed. */
type Json<T = unknown> = ColumnType<T, string, string>;
type JsonNullable<T = unknown> = ColumnType<T | null, string | null | undefined, string | null>;

export interface OrganizationTable {
  id: string;
  name: string;
  domain: string;
  inserted_at: Timestamp;
  updated_at: Timestamp;
}

export interface WorkspaceTable {
  id: string;
  organization_id: string;
  name: string;
  inserted_at: Timestamp;
  updated_at: Timestamp;
}

export interface UserTable {
  id: string;
  email: string;
  first_name: string | null;
  last_name: string | null;
  phone_number: string | null;
  timezone: string | null;
  preferences: Json<Record<string, unknown>>;
  inserted_at: Timestamp;
  updated_at: Timestamp;
}

export type Role = 'owner' | 'admin' | 'member';

export interface OrgMembershipTable {
  id: string;
  organization_id: string;
  user_id: string;
  role: Role;
  is_active: Generated<boolean>;
  inserted_at: Timestamp;
  updated_at: Timestamp;
}

export interface ServiceAccountTable {
  id: string;
  organization_id: string;
  workspace_id: string;
  run_as_membership_id: string;
  name: string;
  client_id: string;
  /** hex SHA-256 of the client secret: the secret has 256 bits of entropy, so a fast hash is safe. */
  secret_hash: string;
  scopes: string[];
  is_active: Generated<boolean>;
  /**
   * Tokens minted before this instant are refused. Set when the account is deactivated,
   * moved or loses a scope, so undoing the change does not revive tokens minted before it.
   */
  tokens_not_before: Date | null;
  inserted_at: Timestamp;
  updated_at: Timestamp;
}

export interface DataModelTable {
  id: string;
  organization_id: string;
  workspace_id: string;
  name: string;
  slug: string;
  description: string | null;
  retention_days: number | null;
  inserted_at: Timestamp;
  updated_at: Timestamp;
}

export type FieldType = 'string' | 'integer' | 'boolean' | 'datetime' | 'float' | 'map';

export interface DataModelFieldTable {
  id: string;
  organization_id: string;
  workspace_id: string;
  data_model_id: string;
  name: string;
  label: string;
  description: string | null;
  type: FieldType | null;
  is_primary_key: boolean;
  is_required: boolean;
  is_indexed: Generated<boolean>;
  /** The typed value slot of an indexed field on facts and fact_current (migration 0031), e.g. 'num_1'. */
  slot: string | null;
  /** The slot holds every stored fact's value: readers use it (src/facts/slots.sql.ts). */
  slot_ready: Generated<boolean>;
  constraints: JsonNullable<Record<string, unknown>>;
  inserted_at: Timestamp;
  updated_at: Timestamp;
}

export interface DashboardWidgetTable {
  id: string;
  organization_id: string;
  workspace_id: string;
  data_model_id: string | null;
  dashboard: string;
  kind: string;
  title: string | null;
  position: Json<{ x: number; y: number; w: number; h: number }>;
  config: Json<Record<string, unknown>>;
  inserted_at: Timestamp;
  updated_at: Timestamp;
}

export interface IdempotencyKeyTable {
  credential_id: string;
  key: string;
  fingerprint: string;
  /** 'in_flight' until the first response is stored, then 'done'. */
  state: 'in_flight' | 'done';
  status: number | null;
  body: string | null;
  /** An in-flight claim older than this was abandoned (crash) and may be taken over. */
  locked_until: Timestamp;
  expires_at: Timestamp;
  inserted_at: Timestamp;
}

export interface InstanceSecretTable {
  name: string;
  value: string;
  inserted_at: Timestamp;
}

/**
 * A fact: one observation of a business entity, conforming to a data model.
 * entity_id comes from the model's primary-key field (null without one).
 * source_key makes a retried writer idempotent: unique per data model.
 */
export interface FactTable {
  id: string;
  organization_id: string;
  workspace_id: string;
  data_model_id: string;
  entity_id: string | null;
  observed_at: Timestamp;
  inserted_at: Timestamp;
  data: Json<unknown>;
  source_key: string;
}

export type TimeAxis = 'observed_at' | 'inserted_at';

/**
 * The current state: per data model, time axis and entity, the latest fact (ordered by
 * the axis, then inserted_at, then id). entity_key is the entity id, or, for a fact with
 * no entity id, a key of its own (each such fact is its own entity).
 */
export interface FactCurrentTable {
  data_model_id: string;
  axis: TimeAxis;
  entity_key: string;
  fact_id: string;
  workspace_id: string;
  entity_id: string | null;
  observed_at: Timestamp;
  inserted_at: Timestamp;
  data: Json<unknown>;
}

export type ConnectorAuthType = 'none' | 'oauth2' | 'api_key' | 'bearer_token' | 'basic_auth' | 'hmac';

export interface ExternalConnectorTable {
  id: string;
  organization_id: string;
  workspace_id: string;
  name: string;
  auth_type: ConnectorAuthType;
  type: 'http' | 's3' | 'snowflake' | null;
  direction: 'inbound' | 'outbound' | null;
  status: ColumnType<'unverified' | 'verified' | 'failing', 'unverified' | 'verified' | 'failing' | undefined, 'unverified' | 'verified' | 'failing'>;
  config: JsonNullable<Record<string, unknown>>;
  description: string | null;
  provider_slug: string | null;
  /** AES-256-GCM (secret-box.ts); never read back into an answer. */
  secret_ciphertext: string | null;
  has_secret: Generated<boolean>;
  last_verified_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  last_error: string | null;
  inserted_at: Timestamp;
  updated_at: Timestamp;
}

/** An uploaded OpenAPI/Swagger document and what the service derived from it (openapi/normalize.ts). */
export interface ApiSpecTable {
  id: string;
  organization_id: string;
  workspace_id: string;
  name: string;
  format: 'json' | 'yaml';
  raw_document: string;
  external_connector_id: string | null;
  openapi_version: string | null;
  title: string | null;
  version: string | null;
  servers: Json<Array<{ url: string; description: string | null }>>;
  security_schemes: Json<Record<string, unknown>>;
  /** As openapi/normalize.ts made them when the document was saved. */
  operations: Json<Operation[]>;
  provider_slug: string | null;
  inserted_at: Timestamp;
  updated_at: Timestamp;
  /** What the last update that altered the operations changed in them (null until one). */
  last_changes: JsonNullable<SpecLastChanges>;
  /** Its large columns' length as text (generated): lists budget with it. */
  answer_bytes: GeneratedAlways<string>;
}

/** An api_spec's last change of its operations: diffOperations' answer, and when. */
export type SpecLastChanges = SpecChanges & { changed_at: string };

/** One fixed window of a shared counter (connectors/rate.ts). */
export interface RateWindowTable {
  key: string;
  window_start: string;
  count: number;
}

/** Its output is the expression's value. */
export interface TransformStep {
  key: string;
  type: 'transform';
  config: { expression: string };
}

/** Its output is whether the expression's value is truthy; false skips the rest of the run. */
export interface ConditionStep {
  key: string;
  type: 'condition';
  config: { expression: string };
}

/** Exactly one of mapping (field: expression) and data (one expression) is given. */
export interface WriteFactConfig {
  data_model_slug: string;
  mapping?: Record<string, string>;
  data?: string;
  observed_at?: string;
  for_each?: string;
}

export interface WriteFactStep {
  key: string;
  type: 'write_fact';
  config: WriteFactConfig;
}

/** Either operation_ref or method and path; params, query and headers are name: expression, body one expression. */
export interface HttpRequestConfig {
  connector_id: string;
  operation_ref?: string;
  method?: string;
  path?: string;
  params?: Record<string, string>;
  query?: Record<string, string>;
  headers?: Record<string, string>;
  body?: string;
  /** Paged calls (docs/workflows.md, "Paged calls"): expressions over each answer. */
  paginate?: PaginateConfig;
}

/** `items` picks a page's items, `next` gives the next page's parameters (nothing: the last page); at most max_pages. */
export interface PaginateConfig {
  items: string;
  next: string;
  max_pages?: number;
}

export interface HttpRequestStep {
  key: string;
  type: 'http_request';
  config: HttpRequestConfig;
}

/** Cases in order, each an expression and its steps; the first true one runs, else `default`. */
export interface SwitchConfig {
  cases: Array<{ when: string; steps: WorkflowStep[] }>;
  default: WorkflowStep[];
}

export interface SwitchStep {
  key: string;
  type: 'switch';
  config: SwitchConfig;
}

/** Its steps run once per item of `items`, at most `concurrency` items at once. */
export interface ForEachConfig {
  items: string;
  concurrency: number;
  steps: WorkflowStep[];
}

export interface ForEachStep {
  key: string;
  type: 'for_each';
  config: ForEachConfig;
}

/** Writes the workflow's state document (docs/workflows.md, "Workflow state"). */
export interface SetStateStep {
  key: string;
  type: 'set_state';
  config: { value: string };
}

/**
 * A step of a workflow definition, as saved: workflows/definition.ts checked its config
 * for its type before it was stored, so a stored step read back has this shape.
 */
export type WorkflowStep =
  TransformStep | ConditionStep | WriteFactStep | HttpRequestStep | SwitchStep | ForEachStep | DelayStep | WaitUntilStep | WaitForDeliveryStep | SetStateStep;

/** Parks the run for a duration: `duration` is an expression giving "10m", "1h30m", "PT10M" or a number of seconds (steps/waits.ts). */
export interface DelayStep {
  key: string;
  type: 'delay';
  config: { duration: string };
}

/** Parks the run until an instant: `at` is an expression giving an ISO-8601 instant with its offset. */
export interface WaitUntilStep {
  key: string;
  type: 'wait_until';
  config: { at: string };
}

/** What a wait_for_delivery does when its timeout comes first: fail the step, or continue with output null. */
export type OnTimeout = 'fail' | 'continue';

/** Parks the run until a later delivery on `trigger` whose `match` is true, or `timeout` (a duration, as delay's). */
export interface WaitForDeliveryStep {
  key: string;
  type: 'wait_for_delivery';
  /** `on_timeout`: fail, continue, or steps run when the timeout comes first (their last output is the step's). */
  config: { trigger: string; match?: string; timeout: string | number; on_timeout?: OnTimeout | WorkflowStep[] };
}

export type CatchUp = 'latest' | 'none';

/** A workflow's concurrency by key (docs/workflows.md, "Concurrency"): `key` a JSONata expression over payload and delivery. */
export interface WorkflowConcurrency {
  key: string;
  limit: number;
}

/** The bodies a webhook trigger takes: `json` only, or `form` (application/x-www-form-urlencoded) too. */
export type WebhookAccept = 'json' | 'form';

/** A trigger as reads show it: never its token. A schedule's next_fire_at is added at read time. */
export type WorkflowTriggerView =
  | { id: string; key: string; type: 'webhook'; service_account_id: string; inbound_connector_id: string | null; accept: WebhookAccept }
  | { id: string; key: string; type: 'schedule'; cron: string; timezone: string; catch_up: CatchUp };

export interface WorkflowTable {
  id: string;
  organization_id: string;
  workspace_id: string;
  name: string;
  description: string | null;
  is_active: boolean;
  version: number;
  revision: number;
  graph_hash: string;
  lock_version: string;
  steps: Json<WorkflowStep[]>;
  /** The steps run once when a run fails for good (migration 0026). */
  on_failure: ColumnType<WorkflowStep[], string | undefined, string>;
  triggers: Json<WorkflowTriggerView[]>;
  /** Null: runs are not limited by key (migration 0028). */
  concurrency: JsonNullable<WorkflowConcurrency>;
  /** The key expression of its state documents; null: the one document, key '' (migration 0030). */
  state_key: ColumnType<string | null, string | null | undefined, string | null>;
  inserted_at: Timestamp;
  updated_at: Timestamp;
  /** Set by DELETE: the workflow is hidden from every read, its runs stay (migration 0021). */
  deleted_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
}

export interface WorkflowVersionTable {
  id: Generated<string>;
  workspace_id: string;
  workflow_id: string;
  version: number;
  steps: Json<WorkflowStep[]>;
  /** The version's on_failure steps (migration 0026): a run keeps its version's. */
  on_failure: ColumnType<WorkflowStep[], string | undefined, string>;
  /** The version's concurrency by key; null: none (migration 0028). */
  concurrency: JsonNullable<WorkflowConcurrency>;
  /** The version's state key expression; null: none (migration 0030). */
  state_key: ColumnType<string | null, string | null | undefined, string | null>;
  /** The membership whose save wrote these steps (null: saved before it was recorded). */
  saved_by_membership_id: string | null;
  inserted_at: Timestamp;
}

export interface WorkflowTriggerTable {
  id: string;
  workflow_id: string;
  organization_id: string;
  workspace_id: string;
  key: string;
  type: 'webhook' | 'schedule';
  /** A webhook's; a schedule has none. */
  service_account_id: string | null;
  inbound_connector_id: string | null;
  /** A webhook's bodies; a schedule keeps the default, unread. */
  accept: Generated<WebhookAccept>;
  /** hex SHA-256 of the trigger token (256 random bits), the only form it is kept in; a schedule has no token. */
  token_hash: string | null;
  cron: string | null;
  timezone: string | null;
  catch_up: CatchUp | null;
  /** A schedule counts ticks from here (saved, changed, or its workflow activated). */
  schedule_since: Timestamp | null;
  /** The schedule's last fired tick: the guard that makes one run per tick. */
  last_tick_at: Timestamp | null;
  inserted_at: Timestamp;
  updated_at: Timestamp;
}

export type RunStatus = 'queued' | 'running' | 'retrying' | 'waiting' | 'succeeded' | 'failed' | 'cancelled';
/** `waiting`: the step the run is parked on (delay, wait_until, wait_for_delivery). */
export type StepStatus = 'succeeded' | 'failed' | 'skipped' | 'waiting';
/** Why a finished run ended (null while it has not): see migrations/0013_run_outcomes.ts. */
export type RunOutcome = 'completed' | 'stopped_at_condition' | 'failed' | 'dead_letter' | 'cancelled';

/** A step's record on its run. */
export interface StepRecord {
  key: string;
  status: StepStatus;
  started_at: string | null;
  finished_at: string | null;
  output: unknown;
  error: string | null;
  /** Set when the record keeps only a preview of the output (its size cap): the output's size as JSON. */
  output_truncated?: true;
  output_bytes?: number;
  /** A skipped step: why (`condition false at step K`, `step K failed`). */
  reason?: string;
  /** A condition: the value its expression gave, before it was read as true or false. */
  value?: unknown;
  /** A succeeded or failed step: the attempt whose result this is (a step resumed from the checkpoint keeps the attempt that ran it). */
  attempt?: number;
  /** How many attempts ran the step to a result (succeeded or failed), this one included. */
  attempts?: number;
  /** A switch: the case that ran (its index in `cases`), or `default`. */
  branch?: number | 'default';
  /** A switch: the records of its branch's steps. */
  steps?: StepRecord[];
  /** A for_each: how many items it had and how each ended. */
  items?: { count: number; succeeded: number; stopped: number; failed: number; not_run: number };
  /** A for_each: the records of some items' steps (the first ITEM_RECORDS_SHOWN, and a failed one). */
  item_records?: ItemRecord[];
  /** An on_failure step's record (after the run's own, in `steps`). */
  on_failure?: true;
  /** Its nested records (`steps`, `item_records[].steps`) were dropped to keep the run's record within RUN_STEPS_MAX_BYTES. */
  records_cut?: true;
}

/** The steps of one for_each item, on its for_each's record. */
export interface ItemRecord {
  index: number;
  status: 'succeeded' | 'stopped' | 'failed' | 'not_run';
  reason?: string;
  steps: StepRecord[];
}

/**
 * What a run has done, for its later attempts (docs/workflows.md, "Durable steps"): the
 * records of its first steps that succeeded, in order, outputs as the later steps saw them,
 * and how many attempts ran each step to a result.
 */
export interface RunCheckpoint {
  steps: StepRecord[];
  /** By step instance: a step's key, inside a for_each item `<for_each key>[<index>].<key>`. */
  tries: Record<string, number>;
  /** The succeeded records of steps inside a switch branch or a for_each item not yet finished, by step instance. */
  nested?: Record<string, StepRecord>;
  /** What a step saved of its own progress (StepContext.progress), by step instance: a switch's branch, a for_each's finished items. */
  progress?: Record<string, unknown>;
  /** The step that parked the run (a wait), by instance, and what it saved; `delivery` when a delivery it waited for matched. */
  parked?: { key: string; state: unknown; delivery?: { payload: unknown; id: string | null; headers: Record<string, string> | null } };
  /** Set once the run's on_failure steps have started: the failure they see (a later attempt resumes them, never the run's own). */
  failing?: { step: string; error: string; outcome: 'failed' | 'dead_letter'; message: string };
}

/** A workflow's state document (migration 0029): this release keeps the key '' only. */
export interface WorkflowStateTable {
  id: string;
  workspace_id: string;
  workflow_id: string;
  key: Generated<string>;
  value: Json<unknown>;
  /** The run whose set_state step wrote it last. */
  updated_by_run_id: string | null;
  inserted_at: Timestamp;
  updated_at: Timestamp;
}

export interface WorkflowRunTable {
  id: string;
  organization_id: string;
  workspace_id: string;
  workflow_id: string;
  workflow_version: number;
  trigger_key: string | null;
  delivery_id: string | null;
  payload: Json<unknown>;
  status: ColumnType<RunStatus, RunStatus | undefined, RunStatus>;
  attempt: Generated<number>;
  max_attempts: Generated<number>;
  lease_losses: Generated<number>;
  steps: ColumnType<StepRecord[], string | undefined, string>;
  /** The succeeded steps a later attempt resumes after; null before the first and after the run ends. */
  checkpoint: ColumnType<RunCheckpoint | null, string | null | undefined, string | null>;
  error: string | null;
  replay_of: string | null;
  outcome: ColumnType<RunOutcome | null, RunOutcome | null | undefined, RunOutcome | null>;
  facts_written: Generated<number>;
  /** What the facts' source keys derive from: the delivery identity, a schedule's tick, or the original's (a replay). */
  source_identity: string | null;
  /** The headers of the delivery that made the run, secrets redacted (triggers/delivery-headers.ts); null for a schedule's. */
  delivery_headers: JsonNullable<Record<string, string>>;
  /** A replay's: the delivery id of the run it copies (that run's delivery_id, or its own replayed_delivery_id); null otherwise. */
  replayed_delivery_id: ColumnType<string | null, string | null | undefined, string | null>;
  /** The W3C trace context of the span that made the run (a delivery, a replay request, a schedule tick); null when tracing was off. */
  traceparent: string | null;
  tracestate: string | null;
  /** The key computed when the run was enqueued (runs/concurrency.ts) and the limit of then; null: not limited (migration 0028). */
  concurrency_key: ColumnType<string | null, string | null | undefined, string | null>;
  concurrency_limit: ColumnType<number | null, number | null | undefined, number | null>;
  /** The key of the state document it reads and writes, computed when it was enqueued (runs/state-key.ts); null: '' (migration 0030). */
  state_key: ColumnType<string | null, string | null | undefined, string | null>;
  run_at: Timestamp;
  /** While the run is waiting (a delay, wait_until or wait_for_delivery): when it resumes at the latest; null otherwise (migration 0027). */
  resume_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  locked_by: string | null;
  locked_until: ColumnType<Date | null, Date | null | undefined, Date | null>;
  inserted_at: Timestamp;
  updated_at: Timestamp;
  started_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  finished_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
}

/**
 * What a run parked on a wait_for_delivery waits for (migration 0027): one row per waiting
 * run, found by (workflow, trigger) when a delivery is accepted (runs/waits.sql.ts). A
 * matched delivery is kept here (`delivery`) until the run has taken it.
 */
export interface RunWaitTable {
  run_id: string;
  workspace_id: string;
  workflow_id: string;
  trigger_key: string;
  /** The step's match expression; null: any delivery on the trigger matches. */
  match: string | null;
  timeout_at: Timestamp;
  /** The matched delivery, {payload, id, headers}; null until one matched. */
  delivery: JsonNullable<{ payload: unknown; id: string | null; headers: Record<string, string> | null }>;
  matched_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  inserted_at: Timestamp;
}

export interface DeliveryGuardTable {
  organization_id: string;
  delivery_key: string;
  run_id: string;
  inserted_at: Timestamp;
}

export interface DB {
  run_waits: RunWaitTable;
  facts: FactTable;
  fact_current: FactCurrentTable;
  organizations: OrganizationTable;
  workspaces: WorkspaceTable;
  users: UserTable;
  org_memberships: OrgMembershipTable;
  service_accounts: ServiceAccountTable;
  data_models: DataModelTable;
  data_model_fields: DataModelFieldTable;
  dashboard_widgets: DashboardWidgetTable;
  external_connectors: ExternalConnectorTable;
  api_specs: ApiSpecTable;
  rate_windows: RateWindowTable;
  idempotency_keys: IdempotencyKeyTable;
  instance_secrets: InstanceSecretTable;
  workflows: WorkflowTable;
  workflow_versions: WorkflowVersionTable;
  workflow_triggers: WorkflowTriggerTable;
  workflow_runs: WorkflowRunTable;
  delivery_guards: DeliveryGuardTable;
  workflow_state: WorkflowStateTable;
}
