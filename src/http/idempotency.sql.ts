import { sql } from 'kysely';
import type { Db } from '../db/connect.ts';

/**
 * Claims a key for a first request. Returns true when this request owns it: the key was
 * free, or its previous holder expired, or abandoned an in-flight claim (crashed).
 */
export async function claimKey(db: Db, credentialId: string, key: string, fingerprint: string, ttlSeconds: number, leaseSeconds: number): Promise<boolean> {
  const row = await db
    .insertInto('idempotency_keys')
    .values({
      credential_id: credentialId,
      key,
      fingerprint,
      state: 'in_flight',
      locked_until: sql<Date>`now() + make_interval(secs => ${leaseSeconds})`,
      expires_at: sql<Date>`now() + make_interval(secs => ${ttlSeconds})`,
    })
    .onConflict((oc) =>
      oc
        .columns(['credential_id', 'key'])
        .doUpdateSet({
          fingerprint,
          state: 'in_flight',
          status: null,
          body: null,
          locked_until: sql<Date>`now() + make_interval(secs => ${leaseSeconds})`,
          expires_at: sql<Date>`now() + make_interval(secs => ${ttlSeconds})`,
          inserted_at: sql<Date>`now()`,
        })
        // Take over only a stale row: expired, or an in-flight claim whose lease ran out.
        .where((eb) =>
          eb.or([
            eb('idempotency_keys.expires_at', '<=', sql<Date>`now()`),
            eb.and([eb('idempotency_keys.state', '=', 'in_flight'), eb('idempotency_keys.locked_until', '<=', sql<Date>`now()`)]),
          ]),
        ),
    )
    .returning('key')
    .executeTakeFirst();
  return row !== undefined;
}

export function findKey(db: Db, credentialId: string, key: string) {
  return db
    .selectFrom('idempotency_keys')
    .select(['fingerprint', 'state', 'status', 'body'])
    .where('credential_id', '=', credentialId)
    .where('key', '=', key)
    .executeTakeFirst();
}

export async function completeKey(db: Db, credentialId: string, key: string, status: number, body: string): Promise<void> {
  await db.updateTable('idempotency_keys').set({ state: 'done', status, body }).where('credential_id', '=', credentialId).where('key', '=', key).execute();
}

export async function releaseKey(db: Db, credentialId: string, key: string): Promise<void> {
  await db.deleteFrom('idempotency_keys').where('credential_id', '=', credentialId).where('key', '=', key).where('state', '=', 'in_flight').execute();
}

/** Retention: delete keys past their TTL, a bounded batch at a time (ctid: the table has a composite key). */
export async function deleteExpiredKeys(db: Db, now: Date, batch: number): Promise<number> {
  const r =
    await sql`delete from idempotency_keys where ctid in (select ctid from idempotency_keys where expires_at <= ${now}::timestamptz limit ${batch})`.execute(
      db,
    );
  return Number(r.numAffectedRows ?? 0);
}
