import { sql, type Kysely } from 'kysely';

/**
 * Who saved each version's steps: an http_request step calls out with a connector's
 * credentials, which only an admin or owner may hand to a workflow, so a run checks at
 * each attempt that the membership that saved the steps may still do so. Versions saved
 * before this column existed have no saver, and their http_request steps fail until an
 * admin or owner saves the workflow again.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table workflow_versions add column saved_by_membership_id uuid references org_memberships (id)`.execute(db);
}
