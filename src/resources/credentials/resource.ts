import type { ResourceType } from '../resource.ts';
import { SCOPES } from '../../auth/tokens.ts';
import { TIMESTAMPS } from '../common.ts';
import { visibleCredentials } from './credentials.sql.ts';

export const credentialType: ResourceType = {
  type: 'credential',
  path: 'credentials',
  table: 'service_accounts',
  attributes: {
    client_id: { column: 'client_id', kind: 'string', filter: true, sort: true },
    is_active: { column: 'is_active', kind: 'boolean', filter: true, sort: true },
    name: { column: 'name', kind: 'string', filter: true, sort: true },
    scopes: { column: 'scopes', kind: 'string_array', values: SCOPES, filter: true },
    // The workspace the account acts in: a console signed in with a client id finds it here.
    workspace_id: { column: 'workspace_id', kind: 'uuid', filter: true },
    ...TIMESTAMPS,
  },
  relationships: {
    workspace: { type: 'workspace', kind: 'one', column: 'workspace_id' },
    run_as_membership: { type: 'org_membership', kind: 'one', column: 'run_as_membership_id' },
  },
  visible: visibleCredentials,
};
