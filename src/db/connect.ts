/**
 * The only module that knows which engine is behind Kysely: embedded PGlite (zero setup,
 * one connection) or PostgreSQL over a pg Pool. PGlite runs in a worker thread that owns
 * the database (pglite-thread.ts), so a long statement never holds this thread's event loop;
 * the data directory's lock stays with this thread.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Kysely, PGliteDialect, PostgresDialect, type LogEvent, type SelectQueryBuilder } from 'kysely';
import pg from 'pg';
import type { DB } from './tables.ts';
import { lockDataDir } from './data-dir-lock.ts';
import { PgliteThread } from './pglite-thread.ts';
import { parseTimestamptz, TIMESTAMPTZ_OID } from './timestamptz.ts';

export type Db = Kysely<DB>;

/** A select over any table: what a visibility rule narrows. */
export type AnyQuery = SelectQueryBuilder<any, any, any>;

/**
 * SQL texts that run on every request (the account re-check, reads by id, the shapes of
 * lists) and so are worth a named prepared statement on PostgreSQL: parsing and planning
 * the join again each time cost more than executing it. The texts carry every value as a
 * parameter, so a text is a shape; the first MAX_PREPARED_TEXTS shapes are named and the
 * rest run unnamed, so the statements each connection holds stay bounded.
 */
const preparedTexts = new Map<string, string>();
export const MAX_PREPARED_TEXTS = 500;

export function preferPrepared(sqlText: string): void {
  if (preparedTexts.has(sqlText) || preparedTexts.size >= MAX_PREPARED_TEXTS) return;
  preparedTexts.set(sqlText, `tb_${createHash('sha256').update(sqlText).digest('hex').slice(0, 24)}`);
}

type QueryFn = (...args: unknown[]) => unknown;

/** Routes the texts of preferPrepared() through named statements on this client. */
function namePreparedStatements(client: pg.PoolClient): void {
  const query = client.query.bind(client) as QueryFn;
  (client as unknown as { query: QueryFn }).query = (text: unknown, ...rest: unknown[]) => {
    const name = typeof text === 'string' ? preparedTexts.get(text) : undefined;
    return name !== undefined && Array.isArray(rest[0]) ? query({ name, text, values: rest[0] }, ...rest.slice(1)) : query(text, ...rest);
  };
}

export interface DbOptions {
  /** PostgreSQL connection string. */
  databaseUrl?: string | undefined;
  /** Directory for PGlite's files; 'memory' keeps everything in memory (tests). */
  dataDir?: string;
  /** With dataDir 'memory': start from this dump (PGlite dumpDataDir) instead of an empty cluster. */
  initialDump?: Blob | undefined;
  poolSize?: number;
  /** How long opening a PostgreSQL connection may take before the query fails as unavailable. */
  connectTimeoutMs?: number;
  /** Told when a PostgreSQL session is lost (server restart, terminated backend, cut network). */
  onConnectionLost?: (err: Error) => void;
}

export interface DbHandle {
  db: Db;
  /**
   * For bulk writes (an import's batches). On PGlite, one connection, each of its statements
   * waits until no request's statement is waiting, so requests go first; on PostgreSQL `db`.
   */
  bulkDb: Db;
  engine: 'pglite' | 'postgres';
  /** Connections in use and callers waiting for one (PGlite is one connection, always held). */
  poolStats: () => { inUse: number; waiting: number };
  /** performance.now() when a query last succeeded (0: none yet). */
  lastAnswer: () => number;
}

/**
 * Kysely tells its log of every query; a success is what readiness needs to know, so a busy
 * process (its pool full, callers waiting) is not taken for one whose database is gone.
 */
function answerClock(): { log: (event: LogEvent) => void; lastAnswer: () => number } {
  let at = 0;
  return {
    // Any failure (the database gone, or only a constraint) sends readiness back to asking.
    log: (event) => {
      at = event.level === 'query' ? performance.now() : 0;
    },
    lastAnswer: () => at,
  };
}

// timestamptz and jsonb parse the same on both engines; int8 (counts) stays text on pg,
// so queries cast counts to int instead of relying on a global parser.
// This pool's own parsers (pg's global registry is left alone): timestamptz read by
// parseTimestamptz, which gives what pg's parser gives, with less CPU per value.
const poolTypes = {
  getTypeParser: (oid: number, format?: string): unknown =>
    oid === TIMESTAMPTZ_OID && format !== 'binary' ? parseTimestamptz : pg.types.getTypeParser(oid, format as 'text'),
};

export function createDb(opts: DbOptions): DbHandle {
  const { log, lastAnswer } = answerClock();
  if (opts.databaseUrl) {
    const pool = new pg.Pool({
      connectionString: opts.databaseUrl,
      max: opts.poolSize ?? 10,
      connectionTimeoutMillis: opts.connectTimeoutMs ?? 5000,
      types: poolTypes as pg.CustomTypesConfig,
    });
    const lost = (err: Error) => opts.onConnectionLost?.(err);
    // pg emits 'error' on a client whose session ends, idle or checked out (with or without
    // a query running); without a listener that event ends the process. The query in
    // flight fails on its own, and pg-pool drops the client when it is released.
    pool.on('error', () => undefined); // an idle client's loss, already reported by its own listener
    pool.on('connect', (client) => {
      client.on('error', lost);
      namePreparedStatements(client);
    });
    const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool }), log });
    return {
      db,
      bulkDb: db,
      engine: 'postgres',
      poolStats: () => ({ inUse: pool.totalCount - pool.idleCount, waiting: pool.waitingCount }),
      lastAnswer,
    };
  }
  const dir = opts.dataDir ?? '.tributary';
  if (dir === 'memory')
    return { ...pgliteHandles(new PgliteThread({ initialDump: opts.initialDump }), log), engine: 'pglite', poolStats: PGLITE_POOL, lastAnswer };
  const release = lockDataDir(dir);
  const pgdata = path.join(dir, 'pgdata');
  fs.mkdirSync(pgdata, { recursive: true, mode: 0o700 });
  const { db, bulkDb } = pgliteHandles(new PgliteThread({ dataDir: pgdata }), log);
  const destroy = db.destroy.bind(db);
  db.destroy = async () => {
    try {
      await destroy();
    } finally {
      release();
    }
  };
  return { db, bulkDb, engine: 'pglite', poolStats: PGLITE_POOL, lastAnswer };
}

/** Kysely over the thread, and over its bulk lane (whose destroy leaves the database open). */
function pgliteHandles(thread: PgliteThread, log: (event: LogEvent) => void): { db: Db; bulkDb: Db } {
  return {
    db: new Kysely<DB>({ dialect: new PGliteDialect({ pglite: thread }), log }),
    bulkDb: new Kysely<DB>({ dialect: new PGliteDialect({ pglite: thread.bulk() as unknown as PgliteThread }), log }),
  };
}

const PGLITE_POOL = () => ({ inUse: 1, waiting: 0 });
