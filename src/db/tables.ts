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
}

export interface HttpRequestStep {
  key: string;
  type: 'http_request';
  config: HttpRequestConfig;
}

/**
 * A step of a workflow definition, as saved: workflows/definition.ts checked its config
 * for its type before it was stored, so a stored step read back has this shape.
 */
export type WorkflowStep = TransformStep | ConditionStep | WriteFactStep | HttpRequestStep;

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
  triggers: Json<WorkflowTriggerView[]>;
  /** Null: runs are not limited by key (migration 0028). */
  concurrency: JsonNullable<WorkflowConcurrency>;
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
  /** The version's concurrency by key; null: none (migration 0028). */
  concurrency: JsonNullable<WorkflowConcurrency>;
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

export type RunStatus = 'queued' | 'running' | 'retrying' | 'succeeded' | 'failed';
export type StepStatus = 'succeeded' | 'failed' | 'skipped';
/** Why a finished run ended (null while it has not): see migrations/0013_run_outcomes.ts. */
export type RunOutcome = 'completed' | 'stopped_at_condition' | 'failed' | 'dead_letter';

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
}

/**
 * What a run has done, for its later attempts (docs/workflows.md, "Durable steps"): the
 * records of its first steps that succeeded, in order, outputs as the later steps saw them,
 * and how many attempts ran each step to a result.
 */
export interface RunCheckpoint {
  steps: StepRecord[];
  tries: Record<string, number>;
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
  run_at: Timestamp;
  locked_by: string | null;
  locked_until: ColumnType<Date | null, Date | null | undefined, Date | null>;
  inserted_at: Timestamp;
  updated_at: Timestamp;
  started_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  finished_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
}

export interface DeliveryGuardTable {
  organization_id: string;
  delivery_key: string;
  run_id: string;
  inserted_at: Timestamp;
}

export interface DB {
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
}
