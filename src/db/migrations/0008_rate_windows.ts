import { sql, type Kysely } from 'kysely';

/**
 * Fixed-window counters kept in the database, for budgets that must hold across processes
 * when there is no Redis (a connector's rate_limit with several workers on one
 * PostgreSQL). A row is one window of one key; old windows are swept.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table rate_windows (
      key text not null,
      window_start bigint not null,
      count integer not null,
      primary key (key, window_start)
    )
  `.execute(db);
}
