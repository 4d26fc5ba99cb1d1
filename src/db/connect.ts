/**
 * The only module that knows which engine is behind Kysely: embedded PGlite (zero setup,
 * one connection) or PostgreSQL over a pg Pool.
 */
import fs from 'node:fs';
import path from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { Kysely, PGliteDialect, PostgresDialect } from 'kysely';
import pg from 'pg';
import type { DB } from './schema.ts';

export type Db = Kysely<DB>;

export interface DbOptions {
  /** PostgreSQL connection string. */
  databaseUrl?: string | undefined;
  /** Directory for PGlite's files; 'memory' keeps everything in memory (tests). */
  dataDir?: string;
  poolSize?: number;
}

export interface DbHandle {
  db: Db;
  engine: 'pglite' | 'postgres';
}

// timestamptz and jsonb parse the same on both engines; int8 (counts) stays text on pg,
// so queries cast counts to int instead of relying on a global parser.
export function createDb(opts: DbOptions): DbHandle {
  if (opts.databaseUrl) {
    const pool = new pg.Pool({ connectionString: opts.databaseUrl, max: opts.poolSize ?? 10 });
    // An idle client's error (server restart) must not crash the process: the next query reports it.
    pool.on('error', () => {});
    return { db: new Kysely<DB>({ dialect: new PostgresDialect({ pool }) }), engine: 'postgres' };
  }
  const dir = opts.dataDir ?? '.tributary';
  let pglite: PGlite;
  if (dir === 'memory') {
    pglite = new PGlite();
  } else {
    const pgdata = path.join(dir, 'pgdata');
    fs.mkdirSync(pgdata, { recursive: true, mode: 0o700 });
    pglite = new PGlite(pgdata);
  }
  return { db: new Kysely<DB>({ dialect: new PGliteDialect({ pglite }) }), engine: 'pglite' };
}
