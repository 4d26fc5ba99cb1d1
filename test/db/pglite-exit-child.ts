/**
 * A process that opens an in-memory PGlite (in its worker thread), answers one query, then
 * destroys the database (`destroy`) or not (`forget`), and must exit on its own either way.
 * Run by pglite-thread.test.ts; not a test file itself.
 */
import { sql } from 'kysely';
import { createDb } from '../../src/db/connect.ts';
import { pgliteTemplate } from '../helpers/databases.ts';

const { db } = createDb({ dataDir: 'memory', initialDump: await pgliteTemplate() });
console.log((await sql<{ n: number }>`select 6 * 7 as n`.execute(db)).rows[0]?.n);
if (process.argv[2] === 'destroy') await db.destroy();
