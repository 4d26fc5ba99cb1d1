import { sql, type Kysely } from 'kysely';

/**
 * The trace a run belongs to (issue 24, docs/tracing.md): the W3C trace context of the span
 * that made the run (a webhook delivery's server span, a replay request's, a schedule tick's),
 * written in the statement that inserts the run, so that a worker in any process continues
 * that trace: each attempt's span is its child. Null when tracing was off.
 * - traceparent: `00-<trace id>-<span id>-<flags>`; the run's trace id is its 32 hex digits.
 * - tracestate: the vendors' part that came with it, if any.
 * Two nullable columns without defaults: no table rewrite.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table workflow_runs add column traceparent text`.execute(db);
  await sql`alter table workflow_runs add column tracestate text`.execute(db);
}
