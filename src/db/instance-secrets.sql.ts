import { randomBytes } from 'node:crypto';
import type { Db } from './connect.ts';

/**
 * A per-installation secret kept in the database, so every process that shares the
 * database (several servers and workers on one PostgreSQL) agrees on it. Created once;
 * a concurrent first start keeps whichever insert won.
 */
export async function instanceSecret(db: Db, name: string): Promise<Buffer> {
  await db
    .insertInto('instance_secrets')
    .values({ name, value: randomBytes(32).toString('base64') })
    .onConflict((oc) => oc.column('name').doNothing())
    .execute();
  const row = await db.selectFrom('instance_secrets').select('value').where('name', '=', name).executeTakeFirstOrThrow();
  return Buffer.from(row.value, 'base64');
}
