/**
 * From uploaded text to the normalized fields of an api_spec: parse (parse.ts), validate
 * against the official JSON Schemas of Swagger 2.0 and OpenAPI 3.0/3.1 with the validator
 * of @apidevtools/swagger-parser, check every local $ref resolves, normalize
 * (normalize.ts: it also refuses duplicate operation refs and undeclared path
 * parameters), then check the servers against the egress rules.
 *
 * The validator runs on the document as written, $refs intact. swagger-parser's own
 * validate() dereferences first: a document whose references fan out (A uses B twice, B
 * uses C twice, ...) becomes exponentially large from a document of a few KB.
 */
import validateSchema from '@apidevtools/swagger-parser/lib/validators/schema.js';
import { privateHostReason } from '../egress.ts';
import { checkRefs, normalize, type NormalizedSpec } from './normalize.ts';
import { DocumentProblem, parseSpecText, type ParseWork } from './parse.ts';

/**
 * Bytes the normalized operations may take as JSON. The node budgets of normalize.ts count
 * nodes, not bytes: a 3 MB description in a schema that 200 operations reference is one
 * node each time, and 600 MB once written out.
 */
export const NORMALIZED_MAX_BYTES = 16 * 1_048_576;

export interface ImportOptions {
  allowPrivateEgress: boolean;
  /** Most operations the document may have (API_SPEC_MAX_OPERATIONS); no limit when absent. */
  maxOperations?: number;
  /** Counts the work done, for a test that it grows linearly with the document. */
  work?: ParseWork;
}

/** The validator's message, as a caller may see it: its first lines, no paths of this machine. */
function validatorMessage(err: unknown): string {
  const text = String((err as Error)?.message ?? err)
    .replace(/(?:\/[\w.@-]+){2,}\/?/g, (m) => (m.startsWith('/paths') || m.startsWith('/components') || m.startsWith('/definitions') ? m : '(path)'))
    .split('\n')
    .filter((l) => l.trim() !== '')
    .slice(0, 6)
    .join(' ');
  return text.length > 800 ? `${text.slice(0, 800)}...` : text;
}

function checkServers(spec: NormalizedSpec, v2: boolean, opts: ImportOptions): void {
  if (opts.allowPrivateEgress) return;
  spec.servers.forEach((s, i) => {
    let host: string;
    try {
      host = new URL(s.url).hostname;
    } catch {
      return; // A relative server URL names no host: it is resolved against the connector's base_url.
    }
    const reason = privateHostReason(host);
    if (reason !== undefined) {
      throw new DocumentProblem(
        `The server ${JSON.stringify(s.url.slice(0, 200))} points at ${reason} (set ALLOW_PRIVATE_EGRESS=true to allow it)`,
        v2 ? '/host' : `/servers/${i}/url`,
      );
    }
  });
}

export async function importSpec(text: string, format: 'json' | 'yaml', opts: ImportOptions): Promise<NormalizedSpec> {
  const work = opts.work ?? { steps: 0 };
  const doc = parseSpecText(text, format, work);
  const v2 = typeof doc.swagger === 'string';
  if (!v2 && typeof doc.openapi !== 'string') throw new DocumentProblem('The document declares neither openapi (3.x) nor swagger (2.0)');
  if (v2 ? doc.swagger !== '2.0' : !/^3\.[01]\.\d+$/.test(doc.openapi as string)) {
    throw new DocumentProblem(
      `Version ${JSON.stringify(String(v2 ? doc.swagger : doc.openapi).slice(0, 20))} is not supported; Swagger 2.0 and OpenAPI 3.0 and 3.1 are`,
      v2 ? '/swagger' : '/openapi',
    );
  }
  try {
    validateSchema(doc);
  } catch (err) {
    throw new DocumentProblem(`The document is not a valid ${v2 ? 'Swagger 2.0' : `OpenAPI ${doc.openapi as string}`} document: ${validatorMessage(err)}`);
  }
  checkRefs(doc, work);
  const spec = normalize(doc, work, opts.maxOperations);
  checkServers(spec, v2, opts);
  let written: number;
  try {
    written = JSON.stringify(spec.operations).length;
  } catch {
    written = Infinity; // longer than a string can be
  }
  if (written > NORMALIZED_MAX_BYTES) {
    throw new DocumentProblem(
      `The document's operations take more than ${NORMALIZED_MAX_BYTES} bytes once their $refs are written out; make the schemas that many operations share smaller`,
    );
  }
  return spec;
}
