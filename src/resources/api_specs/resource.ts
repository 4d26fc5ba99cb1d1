import type { ResourceType } from '../resource.ts';
import { TIMESTAMPS } from '../common.ts';
import { visibleInWorkspace } from '../workspace-scope.sql.ts';

export const SPEC_FORMATS = ['json', 'yaml'] as const;

/** The uploaded document and what the service derived from it; only name, format, raw_document and the connector are written. */
export const apiSpecType: ResourceType = {
  type: 'api_spec',
  path: 'api_specs',
  table: 'api_specs',
  answerBytesColumn: 'answer_bytes',
  attributes: {
    name: { column: 'name', kind: 'string', filter: true, sort: true },
    format: { column: 'format', kind: 'enum', values: SPEC_FORMATS, filter: true, sort: true },
    raw_document: { column: 'raw_document', kind: 'string', large: true },
    organization_id: { column: 'organization_id', kind: 'uuid', filter: true },
    external_connector_id: { column: 'external_connector_id', kind: 'uuid', filter: true, nullable: true },
    openapi_version: { column: 'openapi_version', kind: 'string', filter: true, sort: true, nullable: true },
    title: { column: 'title', kind: 'string', filter: true, sort: true, nullable: true },
    version: { column: 'version', kind: 'string', nullable: true },
    servers: { column: 'servers', kind: 'json', large: true },
    security_schemes: { column: 'security_schemes', kind: 'json', large: true },
    operations: { column: 'operations', kind: 'json', large: true },
    provider_slug: { column: 'provider_slug', kind: 'string', filter: true, sort: true, nullable: true },
    // What the last update that altered the operations changed in them, and when: {changed_at, added, removed, changed}.
    last_changes: { column: 'last_changes', kind: 'json', nullable: true, large: true },
    ...TIMESTAMPS,
  },
  relationships: {
    external_connector: { type: 'external_connector', kind: 'one', column: 'external_connector_id' },
  },
  visible: visibleInWorkspace('api_specs'),
  deletable: true,
};
