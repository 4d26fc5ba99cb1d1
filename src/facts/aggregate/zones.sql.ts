import { sql } from 'kysely';
import type { Db } from '../../db/connect.ts';

/** The time zone names the database knows (IANA names and their aliases). */
export async function readZoneNames(db: Db): Promise<Set<string>> {
  const r = await sql<{ name: string }>`select name from pg_timezone_names`.execute(db);
  return new Set(r.rows.map((x) => x.name));
}
