import type { ResourceType } from '../resource.ts';
import { TIMESTAMPS } from '../common.ts';
import { visibleInWorkspace } from '../workspace-scope.sql.ts';

export const FIELD_TYPES = ['string', 'integer', 'boolean', 'datetime', 'float', 'map'] as const;

export const dataModelFieldType: ResourceType = {
  type: 'data_model_field',
  path: 'data_model_fields',
  table: 'data_model_fields',
  attributes: {
    data_model_id: { column: 'data_model_id', kind: 'uuid', filter: true },
    name: { column: 'name', kind: 'string', filter: true, sort: true },
    label: { column: 'label', kind: 'string', filter: true, sort: true },
    description: { column: 'description', kind: 'string', filter: true, nullable: true },
    type: { column: 'type', kind: 'enum', values: FIELD_TYPES, filter: true, sort: true, nullable: true },
    is_primary_key: { column: 'is_primary_key', kind: 'boolean', filter: true },
    is_required: { column: 'is_required', kind: 'boolean', filter: true },
    is_indexed: { column: 'is_indexed', kind: 'boolean', filter: true },
    constraints: { column: 'constraints', kind: 'json', nullable: true },
    ...TIMESTAMPS,
  },
  relationships: {
    data_model: { type: 'data_model', kind: 'one', column: 'data_model_id' },
  },
  visible: visibleInWorkspace('data_model_fields'),
  deletable: true,
};
