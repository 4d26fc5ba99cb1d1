import { sql, type Kysely } from 'kysely';

/**
 * tributary_timestamptz_or_null(text): the text as a timestamptz, or null where the cast
 * fails (a conversion error, class 22). factQuery compares the values of a datetime field
 * as instants. The writer stores only valid ones, but a field retyped to datetime after
 * facts were written may hold strings of ISO shape that are no instant ("2026-02-30T10:00Z",
 * hour 25): cast directly, one such row failed every query that compared the field.
 *
 * Callers check the ISO shape with a zone first (facts/query/filters.sql.ts), which keeps out what
 * PostgreSQL would also read ('now', 'today', '1/2/2026' as DateStyle has it); the result
 * then depends on no setting, but the cast is STABLE, and so is this. The exception block
 * (a subtransaction) costs less per call than the shape check and the cast.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create function tributary_timestamptz_or_null(value text) returns timestamptz
    language plpgsql stable strict parallel safe as $$
    begin
      return value::timestamptz;
    exception when data_exception then
      return null;
    end
    $$
  `.execute(db);
}
