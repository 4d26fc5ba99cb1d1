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
   * quota counts (quotas/quotas.ts) counts and inserts under it, so two creates at a
   * quota's last slot do not both pass.
   */
  quota: 7312,
  /**
   * Transaction-level, the first key of a two-key lock (pg_advisory_xact_lock(int, int)):
   * one bulk replay at a time per workspace, the second key the workspace id's hashtext.
   * Without a second key (all workspaces, for the admin API) it is taken alone: exclusive
   * for the admin's replay of every workspace, shared beside a workspace's own lock.
   */
  bulkReplay: 7313,
  /**
   * Transaction-level, two-key form (rateKey, hashtext(key)): one check-and-count at a
   * time per key of a connector's rate budget (connectors/rate.ts, on PostgreSQL without Redis).
   */
  rateKey: 7314,
  /**
   * Transaction-level, two-key form (concurrencyKey, hashtext(workflow id ':' key)), tried
   * (pg_try_advisory_xact_lock): one claim at a time per concurrency key (runs/queue.sql.ts,
   * claimKeyed); a key another claim holds is skipped, never waited for.
   */
  concurrencyKey: 7316,
  /**
   * Session-level, taken by Kysely's Migrator itself (PostgresAdapter.acquireMigrationLock)
   * for a whole run: processes starting at once migrate one after the other. Listed so
   * no id of ours collides with it.
   */
  migrate: 3853314791062309107n,
} as const;
