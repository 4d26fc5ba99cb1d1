/**
 * Bundled providers: specifications written for this project, with the connector settings
 * that go with them. Creating an api_spec or an external_connector with a provider_slug
 * installs from here. A slug is a tag, not an identity: a workspace may hold several
 * connections to one provider.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ConnectorAuthType } from '../db/tables.ts';

export interface Provider {
  slug: string;
  name: string;
  description: string;
  /** What an external_connector installed from this provider starts with. */
  connector: {
    type: 'http' | 's3' | 'snowflake';
    auth_type: ConnectorAuthType;
    direction: 'outbound';
    config: Record<string, unknown>;
  };
  spec: { format: 'json' | 'yaml'; text: string };
}

const DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), 'specs');
const read = (file: string) => fs.readFileSync(path.join(DIR, file), 'utf8');

function load(): Provider[] {
  return [
    {
      slug: 'tributary-orders',
      name: 'Orders API',
      description: 'A shop order service (JSON over HTTP, API key in X-Api-Key): list, read, create and update orders.',
      connector: {
        type: 'http',
        auth_type: 'api_key',
        direction: 'outbound',
        config: { base_url: 'https://orders.example.com/v1', header_name: 'X-Api-Key', health_operation: 'getHealth' },
      },
      spec: { format: 'yaml', text: read('tributary-orders.yaml') },
    },
    {
      slug: 'acme-ledger',
      name: 'Acme Ledger API',
      description: 'A ledger of accounts and entries (JSON over HTTP, OAuth2 client credentials).',
      connector: {
        type: 'http',
        auth_type: 'oauth2',
        direction: 'outbound',
        config: {
          base_url: 'https://api.acme-ledger.example.com/v2',
          token_url: 'https://auth.acme-ledger.example.com/oauth/token',
          scopes: ['ledger.read', 'ledger.write'],
        },
      },
      spec: { format: 'yaml', text: read('acme-ledger.yaml') },
    },
    {
      slug: 's3-bucket',
      name: 'S3 bucket',
      description: 'Objects in an S3 or S3-compatible bucket: get, put and list (access key id in config, secret access key as the secret).',
      connector: {
        type: 's3',
        auth_type: 'api_key',
        direction: 'outbound',
        config: { region: 'us-east-1', bucket: 'example-bucket', access_key_id: '', force_path_style: false },
      },
      spec: { format: 'yaml', text: read('s3-bucket.yaml') },
    },
    {
      slug: 'snowflake-sql',
      name: 'Snowflake SQL',
      description: 'SQL statements with bound parameters on a Snowflake account (user in config, password as the secret).',
      connector: {
        type: 'snowflake',
        auth_type: 'basic_auth',
        direction: 'outbound',
        config: { account: 'example-account', username: '', warehouse: '', database: '', schema: '', role: '' },
      },
      spec: { format: 'json', text: read('snowflake-sql.json') },
    },
  ];
}

let catalog: readonly Provider[] | undefined;

export function providers(): readonly Provider[] {
  catalog ??= Object.freeze(load());
  return catalog;
}

export function findProvider(slug: string): Provider | undefined {
  return providers().find((p) => p.slug === slug);
}
