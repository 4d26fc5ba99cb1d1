/**
 * Glossary of fact reads.
 * - FactQueryPlan: a checked factQuery, its models resolved in the caller's workspace,
 *   ready to become SQL. Every value in it came through a check; identifiers are picked
 *   from fixed lists.
 * - as of: the state at an instant `until`, per entity its newest fact at or before it.
 * - FactFilter: one checked clause of `filters` or `joinFilters`.
 */
import type { RawBuilder } from 'kysely';
import type { TimeAxis } from '../../db/tables.ts';
import type { DataModelWithFields } from '../models.sql.ts';
import type { FactFilter } from './filters.ts';

export type Frag = RawBuilder<unknown>;

export interface FactQueryPlan {
  workspaceId: string;
  model: DataModelWithFields;
  mode: 'latest' | 'timeline';
  axis: TimeAxis;
  /** Latest: entities whose latest row is older are dropped. Timeline: inclusive start. */
  since: Date | undefined;
  /** Latest: as-of instant (inclusive), absent for the current state. Timeline: exclusive end, always set. */
  until: Date | undefined;
  sort: 'observed_at' | 'inserted_at' | 'entity_id';
  direction: 'asc' | 'desc';
  limit: number;
  offset: number;
  filters: FactFilter[];
  join: { model: DataModelWithFields; type: 'left' | 'inner'; filters: FactFilter[] } | undefined;
  /** As of `until` only: which source finds the rows (chooseAsOf); the history when absent. */
  asOf?: AsOfSource;
}

/**
 * Two ways to the newest fact per entity at or before `until`, same rows:
 * - 'history': DISTINCT ON over every fact up to `until`; its cost follows their number;
 * - 'current': the current state where it is older than `until`, and one probe of the
 *   history per entity changed since; its cost follows the entities and those changed.
 */
export type AsOfSource = 'history' | 'current';

export interface FactSqlRow {
  id: string;
  entity_id: string | null;
  observed_at: Date;
  inserted_at: Date;
  data?: unknown;
  /** The joined fact's data; null when nothing matched (left join). */
  joined?: Record<string, unknown> | null;
}
