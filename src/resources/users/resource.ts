import type { ResourceType } from '../resource.ts';
import { isObject } from '../../json.ts';
import { TIMESTAMPS } from '../common.ts';
import { visibleUsers } from './users.sql.ts';

export const PREFERENCE_DEFAULTS: Readonly<Record<string, unknown>> = Object.freeze({
  theme: 'system',
  locale: 'en-US',
  week_start: 'monday',
  notifications: Object.freeze({ email: true }),
});

/** Stored keys win; keys the stored row lacks come from the defaults, recursively. */
export function withDefaults(defaults: Readonly<Record<string, unknown>>, stored: unknown): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const s = isObject(stored) ? stored : {};
  for (const key of new Set([...Object.keys(defaults), ...Object.keys(s)])) {
    const d = defaults[key];
    const v = s[key];
    out[key] = v === undefined ? d : isObject(d) && isObject(v) ? withDefaults(d, v) : v;
  }
  return out;
}

export const userType: ResourceType = {
  type: 'user',
  path: 'users',
  table: 'users',
  attributes: {
    email: { column: 'email', kind: 'string', filter: true, sort: true },
    first_name: { column: 'first_name', kind: 'string', filter: true, sort: true, nullable: true },
    last_name: { column: 'last_name', kind: 'string', filter: true, sort: true, nullable: true },
    phone_number: { column: 'phone_number', kind: 'string', filter: true, nullable: true },
    preferences: { column: 'preferences', kind: 'json' },
    timezone: { column: 'timezone', kind: 'string', filter: true, nullable: true },
    ...TIMESTAMPS,
  },
  relationships: {},
  visible: visibleUsers,
  present: (row) => ({ preferences: withDefaults(PREFERENCE_DEFAULTS, row.preferences) }),
};
