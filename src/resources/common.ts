import type { AttrSpec } from './resource.ts';

/** inserted_at/updated_at: every stored resource has them, filterable and sortable. */
export const TIMESTAMPS: Record<string, AttrSpec> = {
  inserted_at: { column: 'inserted_at', kind: 'datetime', filter: true, sort: true },
  updated_at: { column: 'updated_at', kind: 'datetime', filter: true, sort: true },
};
