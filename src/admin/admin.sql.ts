/** Writes of the admin API. Tenancy tables are not workspace-scoped, so these take ids directly. */
import type { Insertable, Updateable } from 'kysely';
import type { Db } from '../db/connect.ts';
import type { DashboardWidgetTable, OrganizationTable, OrgMembershipTable, ServiceAccountTable, UserTable, WorkspaceTable } from '../db/schema.ts';

export const ADMIN_CONSTRAINTS: Readonly<Record<string, [string, string]>> = {
  organizations_domain_key: ['/domain', 'an organization with this domain already exists'],
  users_email_key: ['/email', 'a user with this email already exists'],
  org_memberships_org_user_key: ['/user', 'the user is already a member of this organization'],
};

export const insertOrganization = (db: Db, row: Insertable<OrganizationTable>) => db.insertInto('organizations').values(row).returningAll().executeTakeFirstOrThrow();
export const insertWorkspace = (db: Db, row: Insertable<WorkspaceTable>) => db.insertInto('workspaces').values(row).returningAll().executeTakeFirstOrThrow();
export const insertUser = (db: Db, row: Insertable<UserTable>) => db.insertInto('users').values(row).returningAll().executeTakeFirstOrThrow();
export const insertMembership = (db: Db, row: Insertable<OrgMembershipTable>) => db.insertInto('org_memberships').values(row).returningAll().executeTakeFirstOrThrow();
export const insertServiceAccount = (db: Db, row: Insertable<ServiceAccountTable>) => db.insertInto('service_accounts').values(row).returningAll().executeTakeFirstOrThrow();
export const insertWidget = (db: Db, row: Insertable<DashboardWidgetTable>) => db.insertInto('dashboard_widgets').values(row).returningAll().executeTakeFirstOrThrow();

export const findOrganization = (db: Db, id: string) => db.selectFrom('organizations').selectAll().where('id', '=', id).executeTakeFirst();
export const findWorkspace = (db: Db, id: string) => db.selectFrom('workspaces').selectAll().where('id', '=', id).executeTakeFirst();
export const findUser = (db: Db, id: string) => db.selectFrom('users').selectAll().where('id', '=', id).executeTakeFirst();
export const findMembership = (db: Db, id: string) => db.selectFrom('org_memberships').selectAll().where('id', '=', id).executeTakeFirst();
export const findServiceAccount = (db: Db, id: string) => db.selectFrom('service_accounts').selectAll().where('id', '=', id).executeTakeFirst();
export const findDataModel = (db: Db, workspaceId: string, id: string) =>
  db.selectFrom('data_models').select(['id', 'organization_id']).where('workspace_id', '=', workspaceId).where('id', '=', id).executeTakeFirst();

export const setMembershipActive = (db: Db, id: string, active: boolean) =>
  db.updateTable('org_memberships').set({ is_active: active, updated_at: new Date() }).where('id', '=', id).returningAll().executeTakeFirst();

export const updateServiceAccount = (db: Db, id: string, patch: Updateable<ServiceAccountTable>) =>
  db.updateTable('service_accounts').set({ ...patch, updated_at: new Date() }).where('id', '=', id).returningAll().executeTakeFirst();

export async function hasAnyOrganization(db: Db): Promise<boolean> {
  return (await db.selectFrom('organizations').select('id').limit(1).executeTakeFirst()) !== undefined;
}
