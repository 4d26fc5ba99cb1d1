import { sql, type Kysely } from 'kysely';
import type { Db } from '../connect.ts';
import { instanceSecret } from '../instance-secrets.sql.ts';
import { isSealed, keyedFingerprint, sealAnswer } from '../../secret-box.ts';

const BATCH = 1000;

/**
 * Idempotency-Key answers were kept in plain text for the key's lifetime, and an answer can
 * carry a secret shown once (a workflow's trigger tokens); request fingerprints were plain
 * SHA-256 of bodies that can carry a connector's secret. This seals the stored answers and
 * keys the fingerprints (secret-box.ts), as the server now stores them. No schema change:
 * a sealed answer starts with `v1.`, a keyed fingerprint with `h1:`, so a row a server of
 * the earlier version writes during a rolling start is still read right.
 */
export async function up(db: Kysely<any>): Promise<void> {
  let key: Buffer | undefined;
  let after: { credential_id: string; key: string } | undefined;
  for (;;) {
    const rows = await db
      .selectFrom('idempotency_keys')
      .select(['credential_id', 'key', 'fingerprint', 'body'])
      .where((eb) => eb.or([eb('fingerprint', 'not like', 'h1:%'), eb.and([eb('body', 'is not', null), eb('body', 'not like', 'v1.%')])]))
      .$if(after !== undefined, (qb) => qb.where(sql<boolean>`(credential_id, key) > (${after!.credential_id}::uuid, ${after!.key})`))
      .orderBy('credential_id')
      .orderBy('key')
      .limit(BATCH)
      .execute();
    if (rows.length === 0) return;
    // Read (or made) only when there is a row to seal: the key the server reads at start.
    key ??= await instanceSecret(db as Db, 'connector_encryption_key');
    const k = key;
    const fingerprints = rows.map((r) => (r.fingerprint.startsWith('h1:') ? r.fingerprint : keyedFingerprint(k, r.fingerprint)));
    const bodies = rows.map((r) => (r.body === null || isSealed(r.body) ? r.body : sealAnswer(k, r.credential_id, r.key, r.body)));
    await sql`
      update idempotency_keys as i set fingerprint = u.fingerprint, body = u.body
      from unnest(${rows.map((r) => r.credential_id)}::uuid[], ${rows.map((r) => r.key)}::text[], ${fingerprints}::text[], ${bodies}::text[])
        as u(credential_id, key, fingerprint, body)
      where i.credential_id = u.credential_id and i.key = u.key
    `.execute(db);
    if (rows.length < BATCH) return;
    const last = rows[rows.length - 1]!;
    after = { credential_id: last.credential_id, key: last.key };
  }
}
