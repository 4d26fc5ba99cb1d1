/** Writes of the admin API. Tenancy tables are not workspace-scoped, so these take ids directly. */
import type { Insertable, Updateable } from 'kysely';
import type { Db } from '../db/connect.ts';
import type { DashboardWidgetTable, OrganizationTable, OrgMembershipTable, ServiceAccountTable, UserTable, WorkspaceTable } from '../db/tables.ts';

export const ADMIN_CONSTRAINTS: Readonly<Record<string, [string, string]>> = {
  organizations_domain_key: ['/domain', 'an organization with this domain already exists'],
  users_email_key: ['/email', 'a user with this email already exists'],
  org_memberships_org_user_key: ['/user', 'the user is already a member of this organization'],
};

export const insertOrganization = (db: Db, row: Insertable<OrganizationTable>) =>
  db.insertInto('organizations').values(row).returningAll().executeTakeFirstOrThrow();
export const insertWorkspace = (db: Db, row: Insertable<WorkspaceTable>) => db.insertInto('workspaces').values(row).returningAll().executeTakeFirstOrThrow();
export const insertUser = (db: Db, row: Insertable<UserTable>) => db.insertInto('users').values(row).returningAll().executeTakeFirstOrThrow();
export const insertMembership = (db: Db, row: Insertable<OrgMembershipTable>) =>
  db.insertInto('org_memberships').values(row).returningAll().executeTakeFirstOrThrow();
export const insertServiceAccount = (db: Db, row: Insertable<ServiceAccountTable>) =>
  db.insertInto('service_accounts').values(row).returningAll().executeTakeFirstOrThrow();
export const insertWidget = (db: Db, row: Insertable<DashboardWidgetTable>) =>
  db.insertInto('dashboard_widgets').values(row).returningAll().executeTakeFirstOrThrow();
export const deleteWidgetById = (db: Db, id: string) => db.deleteFrom('dashboard_widgets').where('id', '=', id).returning('id').executeTakeFirst();

export const findOrganization = (db: Db, id: string) => db.selectFrom('organizations').selectAll().where('id', '=', id).executeTakeFirst();
export const findUser = (db: Db, id: string) => db.selectFrom('users').selectAll().where('id', '=', id).executeTakeFirst();
export const findMembership = (db: Db, id: string) => db.selectFrom('org_memberships').selectAll().where('id', '=', id).executeTakeFirst();
export const findServiceAccount = (db: Db, id: string) => db.selectFrom('service_accounts').selectAll().where('id', '=', id).executeTakeFirst();

export const setMembershipActive = (db: Db, id: string, active: boolean, now: Date) =>
  db.updateTable('org_memberships').set({ is_active: active, updated_at: now }).where('id', '=', id).returningAll().executeTakeFirst();

export const updateServiceAccount = (db: Db, id: string, patch: Updateable<ServiceAccountTable>, now: Date) =>
  db
    .updateTable('service_accounts')
    .set({ ...patch, updated_at: now })
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirst();

export async function hasAnyOrganization(db: Db): Promise<boolean> {
  return (await db.selectFrom('organizations').select('id').limit(1).executeTakeFirst()) !== undefined;
}

/**
 * Lists for `tributary ... list`: oldest first (the defaults created on first start lead),
 * ties by id; `limit` rows at most. A filter left undefined lists every row.
 */
type ListOpts = { limit: number };

export const listOrganizations = (db: Db, o: ListOpts) =>
  db.selectFrom('organizations').selectAll().orderBy('inserted_at').orderBy('id').limit(o.limit).execute();

export const listWorkspaces = (db: Db, o: ListOpts & { organizationId?: string | undefined }) =>
  db
    .selectFrom('workspaces')
    .selectAll()
    .$if(o.organizationId !== undefined, (qb) => qb.where('organization_id', '=', o.organizationId!))
    .orderBy('inserted_at')
    .orderBy('id')
    .limit(o.limit)
    .execute();

export const listUsers = (db: Db, o: ListOpts) =>
  db
    .selectFrom('users')
    .select(['id', 'email', 'first_name', 'last_name', 'phone_number', 'timezone', 'inserted_at', 'updated_at'])
    .orderBy('inserted_at')
    .orderBy('id')
    .limit(o.limit)
    .execute();

/** Memberships with their user's email, which is what a reader looks for. */
export const listMemberships = (db: Db, o: ListOpts & { organizationId?: string | undefined }) =>
  db
    .selectFrom('org_memberships as m')
    .innerJoin('users as u', 'u.id', 'm.user_id')
    .selectAll('m')
    .select('u.email as user_email')
    .$if(o.organizationId !== undefined, (qb) => qb.where('m.organization_id', '=', o.organizationId!))
    .orderBy('m.inserted_at')
    .orderBy('m.id')
    .limit(o.limit)
    .execute();

/** The public columns of a service account: never its secret hash. */
const ACCOUNT_COLUMNS = [
  'id',
  'organization_id',
  'workspace_id',
  'run_as_membership_id',
  'name',
  'client_id',
  'scopes',
  'is_active',
  'inserted_at',
  'updated_at',
] as const;

export const listServiceAccounts = (db: Db, o: ListOpts & { workspaceId?: string | undefined }) =>
  db
    .selectFrom('service_accounts')
    .select(ACCOUNT_COLUMNS)
    .$if(o.workspaceId !== undefined, (qb) => qb.where('workspace_id', '=', o.workspaceId!))
    .orderBy('inserted_at')
    .orderBy('id')
    .limit(o.limit)
    .execute();

export const findServiceAccountByClientId = (db: Db, clientId: string) =>
  db.selectFrom('service_accounts').select(ACCOUNT_COLUMNS).where('client_id', '=', clientId).executeTakeFirst();

/** Widget placements or data models, of one workspace or of all. */
export const listInWorkspace = (db: Db, table: 'dashboard_widgets' | 'data_models', o: ListOpts & { workspaceId?: string | undefined }) =>
  db
    .selectFrom(table)
    .selectAll()
    .$if(o.workspaceId !== undefined, (qb) => qb.where('workspace_id', '=', o.workspaceId!))
    .orderBy('inserted_at')
    .orderBy('id')
    .limit(o.limit)
    .execute();
