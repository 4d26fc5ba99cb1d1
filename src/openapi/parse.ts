/**
 * Reading an uploaded OpenAPI document (JSON or YAML text) into a plain value, refusing
 * what could exhaust the service before it is validated: a document over the size limit,
 * nesting deeper than MAX_JSON_DEPTH, YAML alias bombs, custom tags and merge keys,
 * prototype keys, and `$ref`s that leave the document (no file or URL is ever fetched).
 *
 * Every refusal is a DocumentProblem: a message and, where there is one, the JSON pointer
 * of the place in the document.
 */
import { isMap, isScalar, parseDocument as parseYamlDocument, visit, type Document } from 'yaml';
import { AppError, UNSTORABLE_TEXT } from '../errors.ts';
import { isStorableText, MAX_JSON_DEPTH, parseJson, pointerToken, spellUnstorable } from '../json.ts';

/** Aliases a YAML document may resolve (anchors are fine; a billion laughs is not). */
export const YAML_MAX_ALIASES = 50;

export class DocumentProblem extends Error {
  readonly at: string | undefined;
  constructor(message: string, at?: string) {
    super(at === undefined ? message : `${message} (at ${at === '' ? 'the document root' : at})`);
    this.name = 'DocumentProblem';
    this.at = at;
  }
}

/** Work done reading a document (nodes visited, keys compared): a test checks it grows linearly. */
export interface ParseWork {
  steps: number;
}

// The tags of the YAML 1.2 core schema; any other tag (`!foo`, `!!js/function`, `!!binary`) is refused.
const CORE_TAGS = new Set([
  'tag:yaml.org,2002:str',
  'tag:yaml.org,2002:int',
  'tag:yaml.org,2002:float',
  'tag:yaml.org,2002:bool',
  'tag:yaml.org,2002:null',
  'tag:yaml.org,2002:map',
  'tag:yaml.org,2002:seq',
  '!',
]);

function parseYaml(text: string, work: ParseWork): unknown {
  let doc: Document.Parsed;
  try {
    // uniqueKeys: false, and the keys are checked below with a Set: the library compares each
    // new key with every earlier one of its map, so its cost grew with the square of a map's keys.
    doc = parseYamlDocument(text, {
      version: '1.2',
      schema: 'core',
      merge: false,
      uniqueKeys: false,
      strict: true,
      prettyErrors: false,
      keepSourceTokens: false,
    });
  } catch (err) {
    // Nesting deep enough to exhaust the composer's stack.
    if (err instanceof RangeError) throw new DocumentProblem(`The document nests deeper than ${MAX_JSON_DEPTH} levels`);
    throw new DocumentProblem('The document is not valid YAML');
  }
  const first = doc.errors[0];
  if (first) throw new DocumentProblem(`The document is not valid YAML: ${first.message.split('\n')[0]}`);
  const warning = doc.warnings[0];
  if (warning) throw new DocumentProblem(`The YAML document uses something this service does not accept: ${warning.message.split('\n')[0]}`);
  let refused: DocumentProblem | undefined;
  visit(doc, {
    Node(_key, node) {
      work.steps++;
      if (node.tag !== undefined && !CORE_TAGS.has(node.tag)) {
        refused = new DocumentProblem(`YAML tags other than the core schema's are not accepted (found ${node.tag.slice(0, 64)})`);
        return visit.BREAK;
      }
      if (isMap(node)) {
        const keys = new Set<unknown>();
        for (const { key } of node.items) {
          work.steps++;
          if (!isScalar(key)) continue;
          if (key.value === '<<' && key.type === 'PLAIN') {
            refused = new DocumentProblem('YAML merge keys (<<) are not accepted; repeat the members or use a $ref');
            return visit.BREAK;
          }
          if (keys.has(key.value)) {
            refused = new DocumentProblem(
              `The document is not valid YAML: Map keys must be unique (${JSON.stringify(String(key.value).slice(0, 200))} appears twice)`,
            );
            return visit.BREAK;
          }
          keys.add(key.value);
        }
      }
      return undefined;
    },
  });
  if (refused) throw refused;
  try {
    return doc.toJS({ maxAliasCount: YAML_MAX_ALIASES });
  } catch (err) {
    if (err instanceof RangeError) throw new DocumentProblem(`The document nests deeper than ${MAX_JSON_DEPTH} levels`);
    if (/alias/i.test((err as Error).message)) throw new DocumentProblem(`The YAML document resolves more than ${YAML_MAX_ALIASES} aliases`);
    throw new DocumentProblem('The document is not valid YAML');
  }
}

/**
 * Walks the value once, without recursion: nesting depth, prototype keys and `$ref`s.
 * Throws the first problem.
 */
function checkValue(root: unknown, work: ParseWork): void {
  const stack: Array<{ v: unknown; depth: number; at: string }> = [{ v: root, depth: 0, at: '' }];
  while (stack.length > 0) {
    const { v, depth, at } = stack.pop()!;
    work.steps++;
    if (typeof v === 'string' && !isStorableText(v)) throw new DocumentProblem(UNSTORABLE_TEXT, at);
    if (typeof v !== 'object' || v === null) continue;
    if (depth >= MAX_JSON_DEPTH) throw new DocumentProblem(`The document nests deeper than ${MAX_JSON_DEPTH} levels`, at);
    if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push({ v: v[i], depth: depth + 1, at: `${at}/${i}` });
      continue;
    }
    if (v instanceof Date || v instanceof Uint8Array) continue;
    for (const [k, child] of Object.entries(v as Record<string, unknown>)) {
      if (!isStorableText(k)) throw new DocumentProblem(UNSTORABLE_TEXT, `${at}/${pointerToken(spellUnstorable(k))}`);
      if (k === '__proto__' || k === 'constructor' || k === 'prototype')
        throw new DocumentProblem(`The member name ${k} is not accepted`, `${at}/${pointerToken(k)}`);
      if (k === '$ref') {
        if (typeof child !== 'string') throw new DocumentProblem('$ref must be a string', `${at}/$ref`);
        if (!child.startsWith('#'))
          throw new DocumentProblem(
            `$ref ${JSON.stringify(child.slice(0, 200))} points outside the document; only local references (#/...) are resolved`,
            `${at}/$ref`,
          );
      }
      stack.push({ v: child, depth: depth + 1, at: `${at}/${pointerToken(k)}` });
    }
  }
}

/** The document as a plain value, or a DocumentProblem. Size is checked by the caller (it knows the limit). */
export function parseSpecText(text: string, format: 'json' | 'yaml', work: ParseWork = { steps: 0 }): Record<string, unknown> {
  let value: unknown;
  if (format === 'json') {
    try {
      value = parseJson(text);
    } catch (err) {
      if (err instanceof AppError && err.code === 'invalid_request') throw new DocumentProblem(err.detail, err.source?.pointer);
      throw new DocumentProblem('The document is not valid JSON (format is json)');
    }
  } else {
    value = parseYaml(text, work);
  }
  // YAML timestamps and binary stay out: the core schema has neither, so any Date here is a bug.
  checkValue(value, work);
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new DocumentProblem('The document must be an object (an OpenAPI or Swagger document)');
  return value as Record<string, unknown>;
}
