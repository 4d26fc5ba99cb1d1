/**
 * Scratch databases for tests and benchmarks, migrated once and copied per use.
 *
 * Booting an empty PGlite runs initdb, which costs several times what the migrations do;
 * a copy loaded from a dump of a migrated database skips both. On PostgreSQL a migrated
 * template database is cloned with CREATE DATABASE ... TEMPLATE. Both copies are keyed by
 * a hash of the migration sources (and the PGlite version), so a changed migration makes
 * a new template instead of reusing a stale one.
 */
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { PGlite } from '@electric-sql/pglite';
import { Kysely, PGliteDialect } from 'kysely';
import pg from 'pg';
import type { DB } from '../../src/db/tables.ts';
import { createDb } from '../../src/db/connect.ts';
import { migrate } from '../../src/db/migrate.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

let cachedKey: string | undefined;

/** A hash of everything that decides the migrated schema. */
function templateKey(): string {
  if (cachedKey !== undefined) return cachedKey;
  const hash = createHash('sha256');
  const dir = path.join(ROOT, 'src/db/migrations');
  for (const file of fs.readdirSync(dir).sort()) hash.update(file).update(fs.readFileSync(path.join(dir, file)));
  hash.update(fs.readFileSync(path.join(ROOT, 'src/db/migrate.ts')));
  hash.update(JSON.parse(fs.readFileSync(path.join(ROOT, 'node_modules/@electric-sql/pglite/package.json'), 'utf8')).version);
  cachedKey = hash.digest('hex').slice(0, 16);
  return cachedKey;
}

let dump: Promise<Blob> | undefined;

/**
 * A dump of a migrated, empty PGlite database: read from the run's cache file, or made and
 * written there (atomically, so files starting at once at worst make it twice).
 */
export function pgliteTemplate(): Promise<Blob> {
  return (dump ??= (async () => {
    const file = path.join(os.tmpdir(), `tributary-pglite-template-${templateKey()}.tar`);
    try {
      return new Blob([fs.readFileSync(file)]);
    } catch {
      // not made yet
    }
    const pglite = new PGlite();
    const db = new Kysely<DB>({ dialect: new PGliteDialect({ pglite }) });
    try {
      await migrate(db);
      const made = await pglite.dumpDataDir('none');
      const tmp = `${file}.${process.pid}.${randomBytes(4).toString('hex')}`;
      fs.writeFileSync(tmp, Buffer.from(await made.arrayBuffer()));
      fs.renameSync(tmp, file);
      return made;
    } finally {
      await db.destroy();
    }
  })());
}

export interface ScratchPostgres {
  url: string;
  version: string;
  drop: () => Promise<void>;
}

function adminClient(baseUrl: string): pg.Client {
  return new pg.Client({ connectionString: baseUrl, connectionTimeoutMillis: 3000, query_timeout: 60_000 });
}

/** The migrated template database on the server of `baseUrl`, made once per migration set. */
async function ensurePostgresTemplate(client: pg.Client, baseUrl: string): Promise<string> {
  const name = `tributary_tpl_${templateKey()}`;
  // Serializes the test files that start at once; the lock ends with the session.
  await client.query('select pg_advisory_lock(hashtext($1))', [name]);
  try {
    const exists = await client.query('select 1 from pg_database where datname = $1', [name]);
    if (exists.rowCount === 0) {
      // Built under another name and renamed, so a crash midway never leaves a half template.
      const building = `${name}_b${randomBytes(3).toString('hex')}`;
      await client.query(`create database ${building}`);
      const url = new URL(baseUrl);
      url.pathname = `/${building}`;
      const { db } = createDb({ databaseUrl: url.toString(), poolSize: 1 });
      try {
        await migrate(db);
      } finally {
        await db.destroy();
      }
      await client.query(`alter database ${building} rename to ${name}`);
    }
  } finally {
    await client.query('select pg_advisory_unlock(hashtext($1))', [name]);
  }
  return name;
}

/**
 * A scratch database `<prefix>_<random>` on the server of `baseUrl`, copied from the
 * migrated template (or empty, for tests of the migrations themselves), with the server
 * version and a drop for the end.
 */
export async function freshPostgres(baseUrl: string, prefix: string, opts: { empty?: boolean } = {}): Promise<ScratchPostgres> {
  const name = `${prefix}_${randomBytes(6).toString('hex')}`;
  const client = adminClient(baseUrl);
  await client.connect();
  let version: string;
  try {
    version = String((await client.query('show server_version')).rows[0]?.server_version ?? '?');
    const template = opts.empty ? undefined : await ensurePostgresTemplate(client, baseUrl);
    await client.query(template === undefined ? `create database ${name}` : `create database ${name} template ${template}`);
  } finally {
    await client.end().catch(() => undefined);
  }
  const url = new URL(baseUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    version,
    drop: async () => {
      const c = adminClient(baseUrl);
      await c.connect();
      try {
        await c.query(`drop database if exists ${name} with (force)`);
      } finally {
        await c.end().catch(() => undefined);
      }
    },
  };
}
