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
   * Transaction-level, two-key form (rateKey, hashtext(key)), a space apart from the ids
   * above: one check-and-count at a time per key of a connector's rate budget
   * (connectors/rate.ts, on PostgreSQL without Redis).
   */
  rateKey: 7312,
  /**
   * Session-level, taken by Kysely's Migrator itself (PostgresAdapter.acquireMigrationLock)
   * for a whole run: processes starting at once migrate one after the other. Listed so
   * no id of ours collides with it.
   */
  migrate: 3853314791062309107n,
} as const;
