import type { ResourceType } from '../resource.ts';
import { TIMESTAMPS } from '../common.ts';
import { visibleInWorkspace } from '../workspace-scope.sql.ts';

export const dataModelType: ResourceType = {
  type: 'data_model',
  path: 'data_models',
  table: 'data_models',
  attributes: {
    name: { column: 'name', kind: 'string', filter: true, sort: true },
    slug: { column: 'slug', kind: 'string', filter: true, sort: true },
    description: { column: 'description', kind: 'string', filter: true, nullable: true },
    organization_id: { column: 'organization_id', kind: 'uuid', filter: true },
    retention_days: { column: 'retention_days', kind: 'integer', filter: true, sort: true, nullable: true },
    ...TIMESTAMPS,
  },
  relationships: {
    fields: { type: 'data_model_field', kind: 'many', foreignKey: 'data_model_id' },
  },
  visible: visibleInWorkspace('data_models'),
  deletable: true,
};
