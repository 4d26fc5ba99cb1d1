/**
 * The body of an import process (import-pool.ts): one document at a time, read, validated
 * and normalized by importSpec. A problem with the document comes back as its text; any
 * other failure as a message the pool logs and answers with 500.
 */
import { serveSandbox } from '../sandbox.ts';
import { importSpec, type ImportOptions } from './import.ts';
import type { NormalizedSpec } from './normalize.ts';
import { DocumentProblem } from './parse.ts';

export interface ImportJob {
  text: string;
  format: 'json' | 'yaml';
  options: Omit<ImportOptions, 'work'>;
}

export type ImportReply = { ok: true; spec: NormalizedSpec } | { ok: false; problem: string } | { ok: false; error: string };

serveSandbox<ImportJob>((job, reply) => {
  importSpec(job.text, job.format, job.options).then(
    (spec) => reply({ ok: true, spec } satisfies ImportReply),
    (err: unknown) =>
      reply(
        (err instanceof DocumentProblem
          ? { ok: false, problem: err.message }
          : { ok: false, error: String((err as Error)?.message ?? err) }) satisfies ImportReply,
      ),
  );
});
