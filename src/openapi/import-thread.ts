/**
 * The body of an import thread (import-pool.ts): one document at a time, read, validated
 * and normalized by importSpec. A problem with the document comes back as its text; any
 * other failure as a message the pool logs and answers with 500.
 */
import { parentPort } from 'node:worker_threads';
import { importSpec, type ImportOptions } from './import.ts';
import { DocumentProblem } from './parse.ts';

export interface ImportJob {
  text: string;
  format: 'json' | 'yaml';
  options: Omit<ImportOptions, 'work'>;
}

parentPort!.on('message', (job: ImportJob) => {
  importSpec(job.text, job.format, job.options).then(
    (spec) => parentPort!.postMessage({ ok: true, spec }),
    (err: unknown) => parentPort!.postMessage(err instanceof DocumentProblem ? { ok: false, problem: err.message } : { ok: false, error: String((err as Error)?.message ?? err) }),
  );
});
