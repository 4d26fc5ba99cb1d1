/**
 * Every PostgreSQL advisory lock id the service takes, in one place, so no two uses share
 * an id by accident. The worker's queue will add its own here.
 */
export const ADVISORY_LOCK = {
  /** Transaction-level: one first start creates the default tenancy. */
  bootstrap: 7310,
  /** Session-level: one sweep at a time across processes. */
  sweep: 7311,
  /**
   * Transaction-level, with the workspace id's hash as its second key: a create that a
   * quota counts (resources/quotas.ts) counts and inserts under it, so two creates at a
   * quota's last slot do not both pass.
   */
  quota: 7312,
  /**
   * Session-level, taken by Kysely's Migrator itself (PostgresAdapter.acquireMigrationLock)
   * for a whole run: processes starting at once migrate one after the other. Listed so
   * no id of ours collides with it.
   */
  migrate: 3853314791062309107n,
} as const;
