import { sql } from 'kysely';
import type { Db } from '../db/connect.ts';

/** The channel idle workers LISTEN on. */
export const NOTIFY_CHANNEL = 'tributary_runs';

/** Wakes the listening workers of every process (PostgreSQL only). */
export async function notifyWorkers(db: Db): Promise<void> {
  await sql`select pg_notify(${NOTIFY_CHANNEL}, '')`.execute(db);
}
