import type { ResourceType } from '../resource.ts';
import { TIMESTAMPS } from '../common.ts';
import { visibleInWorkspace } from '../workspace-scope.sql.ts';

export const dashboardWidgetType: ResourceType = {
  type: 'dashboard_widget',
  path: 'dashboard_widgets',
  table: 'dashboard_widgets',
  attributes: {
    dashboard: { column: 'dashboard', kind: 'string', filter: true, sort: true },
    kind: { column: 'kind', kind: 'string', filter: true, sort: true },
    title: { column: 'title', kind: 'string', filter: true, sort: true, nullable: true },
    data_model_id: { column: 'data_model_id', kind: 'uuid', filter: true, nullable: true },
    position: { column: 'position', kind: 'json' },
    config: { column: 'config', kind: 'json' },
    ...TIMESTAMPS,
  },
  relationships: {
    data_model: { type: 'data_model', kind: 'one', column: 'data_model_id' },
  },
  visible: visibleInWorkspace('dashboard_widgets'),
  deletable: true,
};
