/**
 * Statements built and compiled once, then only bound at each run. Building a Kysely query
 * and compiling it to SQL on every request costs more server CPU than anything else in a
 * read; for the statements that run on every request, that work is done once per text.
 */
import { CompiledQuery, type Compilable } from 'kysely';
import { preferPrepared, type Db } from './connect.ts';

const SLOT = '\u0000slot:';

/** Stands, in a statement given to compileOnce, for the value a run binds under `name`. */
export const slot = (name: string): string => `${SLOT}${name}`;

export interface CompiledOnce {
  sql: string;
  /** The parameters of one run: the slots' values, the fixed parameters as compiled. */
  bind(values: Readonly<Record<string, unknown>>): unknown[];
}

/**
 * Compiles `query` (built with slot() where a run's values go) once. Its text is fixed, so
 * it is also a named prepared statement on PostgreSQL.
 */
export function compileOnce(query: Compilable): CompiledOnce {
  const compiled = query.compile();
  const slots: Array<{ name: string } | { value: unknown }> = compiled.parameters.map((p) =>
    typeof p === 'string' && p.startsWith(SLOT) ? { name: p.slice(SLOT.length) } : { value: p },
  );
  preferPrepared(compiled.sql);
  return {
    sql: compiled.sql,
    bind(values) {
      return slots.map((s) => {
        if (!('name' in s)) return s.value;
        const v = values[s.name];
        if (v === undefined) throw new Error(`no value for the slot ${s.name}`);
        return v;
      });
    },
  };
}

export async function runCompiled<R>(db: Db, statement: CompiledOnce, values: Readonly<Record<string, unknown>>): Promise<R[]> {
  return (await db.executeQuery<R>(CompiledQuery.raw(statement.sql, statement.bind(values)) as CompiledQuery<R>)).rows;
}
