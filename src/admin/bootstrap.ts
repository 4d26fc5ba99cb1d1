/**
 * First start on an empty database: a default organization, workspace, owner and an
 * all-scopes service account, whose client id and secret go to DATA_DIR/bootstrap.json
 * (0600): the only place the secret is ever written.
 */
import { ADVISORY_LOCK } from '../db/advisory-locks.ts';
import fs from 'node:fs';
import path from 'node:path';
import { sql } from 'kysely';
import type { Deps } from '../deps.ts';
import { SCOPES } from '../auth/tokens.ts';
import { hasAnyOrganization } from './admin.sql.ts';
import * as admin from './service.ts';

export interface BootstrapResult {
  organization_id: string;
  workspace_id: string;
  user_id: string;
  membership_id: string;
  credential_id: string;
  client_id: string;
  client_secret: string;
}

export async function bootstrapIfEmpty(deps: Pick<Deps, 'db' | 'log' | 'config'>): Promise<BootstrapResult | undefined> {
  // Serialize concurrent first starts on one PostgreSQL: only one creates the defaults.
  return deps.db.transaction().execute(async (trx) => {
    await sql`select pg_advisory_xact_lock(${ADVISORY_LOCK.bootstrap})`.execute(trx);
    if (await hasAnyOrganization(trx)) return undefined;
    const org = await admin.createOrganization(trx, { name: 'Default organization', domain: 'default.tributary.local' });
    const ws = await admin.createWorkspace(trx, { organization_id: org.id, name: 'Default workspace' });
    const user = await admin.createUser(trx, { email: 'owner@default.tributary.local', first_name: 'Default', last_name: 'Owner' });
    const member = await admin.addMember(trx, { organization_id: org.id, user_id: user.id, role: 'owner' });
    const cred = await admin.createCredential(trx, { workspace_id: ws.id, run_as_membership_id: member.id, name: 'bootstrap', scopes: [...SCOPES] });
    const result: BootstrapResult = {
      organization_id: org.id,
      workspace_id: ws.id,
      user_id: user.id,
      membership_id: member.id,
      credential_id: cred.id,
      client_id: cred.client_id,
      client_secret: cred.client_secret,
    };
    fs.mkdirSync(deps.config.dataDir, { recursive: true, mode: 0o700 });
    const file = path.join(deps.config.dataDir, 'bootstrap.json');
    fs.writeFileSync(file, `${JSON.stringify(result, null, 2)}\n`, { mode: 0o600 });
    fs.chmodSync(file, 0o600);
    deps.log.info({ file, client_id: cred.client_id }, 'empty database: created the default organization and service account');
    return result;
  });
}
