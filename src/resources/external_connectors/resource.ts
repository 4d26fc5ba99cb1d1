import type { ResourceType } from '../resource.ts';
import { TIMESTAMPS } from '../common.ts';
import { visibleInWorkspace } from '../workspace-scope.sql.ts';

export const AUTH_TYPES = ['none', 'oauth2', 'api_key', 'bearer_token', 'basic_auth', 'hmac'] as const;
export const CONNECTOR_TYPES = ['http', 's3', 'snowflake'] as const;
export const DIRECTIONS = ['inbound', 'outbound'] as const;

/** The secret is write-only: reads show has_secret, never the secret or its ciphertext. */
export const externalConnectorType: ResourceType = {
  type: 'external_connector',
  path: 'external_connectors',
  table: 'external_connectors',
  attributes: {
    name: { column: 'name', kind: 'string', filter: true, sort: true },
    auth_type: { column: 'auth_type', kind: 'enum', values: AUTH_TYPES, filter: true, sort: true },
    type: { column: 'type', kind: 'enum', values: CONNECTOR_TYPES, filter: true, nullable: true },
    direction: { column: 'direction', kind: 'enum', values: DIRECTIONS, filter: true, nullable: true },
    status: { column: 'status', kind: 'enum', values: ['unverified', 'verified', 'failing'], filter: true, sort: true },
    config: { column: 'config', kind: 'json', nullable: true },
    description: { column: 'description', kind: 'string', nullable: true },
    provider_slug: { column: 'provider_slug', kind: 'string', filter: true, sort: true, nullable: true },
    organization_id: { column: 'organization_id', kind: 'uuid', filter: true },
    has_secret: { column: 'has_secret', kind: 'boolean', filter: true },
    last_verified_at: { column: 'last_verified_at', kind: 'datetime', filter: true, sort: true, nullable: true },
    last_error: { column: 'last_error', kind: 'string', nullable: true },
    ...TIMESTAMPS,
  },
  relationships: {},
  visible: visibleInWorkspace('external_connectors'),
  deletable: true,
};
