import type { ResourceType } from '../resource.ts';
import { TIMESTAMPS } from '../common.ts';
import { visibleOrganizations } from './organizations.sql.ts';

export const organizationType: ResourceType = {
  type: 'organization',
  path: 'organizations',
  table: 'organizations',
  attributes: {
    name: { column: 'name', kind: 'string', filter: true, sort: true },
    domain: { column: 'domain', kind: 'string', filter: true, sort: true },
    ...TIMESTAMPS,
  },
  relationships: {},
  visible: visibleOrganizations,
};
