import type { ResourceType } from '../resource.ts';
import { TIMESTAMPS } from '../common.ts';
import { visibleMemberships } from './org-memberships.sql.ts';

export const orgMembershipType: ResourceType = {
  type: 'org_membership',
  path: 'org_memberships',
  table: 'org_memberships',
  attributes: {
    is_active: { column: 'is_active', kind: 'boolean', filter: true, sort: true },
    role: { column: 'role', kind: 'enum', values: ['owner', 'admin', 'member'], filter: true, sort: true },
    ...TIMESTAMPS,
  },
  relationships: {
    user: { type: 'user', kind: 'one', column: 'user_id' },
    organization: { type: 'organization', kind: 'one', column: 'organization_id' },
  },
  visible: visibleMemberships,
};
