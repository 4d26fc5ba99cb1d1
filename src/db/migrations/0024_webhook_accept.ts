import { sql, type Kysely } from 'kysely';

/**
 * What body a webhook trigger takes besides JSON: `json` (JSON only, as before) or `form`
 * (application/x-www-form-urlencoded too: GitHub's form deliveries, Slack's slash commands).
 * Additive with a default, so every trigger saved before keeps answering as it did. A
 * schedule has no body; its row keeps the default and nothing reads it.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table workflow_triggers add column accept text not null default 'json' constraint workflow_triggers_accept check (accept in ('json', 'form'))`.execute(
    db,
  );
}
