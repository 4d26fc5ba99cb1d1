/**
 * Normalizing a parsed Swagger 2.0 / OpenAPI 3.0 / 3.1 document into the fields of an
 * api_spec: version, title, servers, security schemes and operations, each operation with
 * its merged parameters, its request and response schemas (local `$ref`s expanded, cycles
 * cut at a `{"$circular": ref}` marker) and a fingerprint of each schema.
 *
 * Glossary: operation_ref is the operationId, or `METHOD /path` when there is none. A
 * fingerprint is the SHA-256 (hex) of the RFC 8785 canonical JSON of the expanded schema:
 * key order and formatting do not change it; any change to the schema does.
 */
import { createHash } from 'node:crypto';
import { canonicalJson, isObject, pointerToken } from '../json.ts';
import { DocumentProblem, type ParseWork } from './parse.ts';

export const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;
/** Nodes one expanded schema may have; past it, further `$ref`s are kept as they are. */
export const MAX_SCHEMA_NODES = 10_000;
/** Nodes all expanded schemas of a document may have together; past it, likewise. */
export const MAX_DOCUMENT_NODES = 500_000;
/** `$ref`s expanded inside one another at most. */
const MAX_REF_NESTING = 32;

export interface Param {
  name: string;
  in: string;
  required: boolean;
  schema: unknown;
}

export interface Operation {
  operation_ref: string;
  method: string;
  path: string;
  params: Param[];
  request_schema: unknown;
  response_schema: unknown;
  request_fingerprint: string | null;
  response_fingerprint: string | null;
}

export interface NormalizedSpec {
  openapi_version: string | null;
  title: string | null;
  version: string | null;
  servers: Array<{ url: string; description: string | null }>;
  security_schemes: Record<string, unknown>;
  operations: Operation[];
}

export function fingerprint(schema: unknown): string | null {
  return schema === null || schema === undefined ? null : createHash('sha256').update(canonicalJson(schema)).digest('hex');
}

/** The value at a local reference `#/a/b`, or a DocumentProblem naming where it was used. */
function resolveRef(doc: Record<string, unknown>, ref: string, usedAt: string): unknown {
  if (ref === '#') return doc;
  if (!ref.startsWith('#/')) throw new DocumentProblem(`$ref ${JSON.stringify(ref.slice(0, 200))} is not a local reference`, usedAt);
  let cur: unknown = doc;
  for (const raw of ref.slice(2).split('/')) {
    let token: string;
    try {
      token = decodeURIComponent(raw).replaceAll('~1', '/').replaceAll('~0', '~');
    } catch {
      throw new DocumentProblem(`$ref ${JSON.stringify(ref.slice(0, 200))} is not a valid pointer`, usedAt);
    }
    if (Array.isArray(cur) && /^\d+$/.test(token)) cur = cur[Number(token)];
    else if (isObject(cur) && Object.hasOwn(cur, token)) cur = cur[token];
    else cur = undefined;
    if (cur === undefined) throw new DocumentProblem(`$ref ${JSON.stringify(ref.slice(0, 200))} points at nothing in the document`, usedAt);
  }
  return cur;
}

/** Every `$ref` of the document resolves within it (parse.ts refused the others). */
export function checkRefs(doc: Record<string, unknown>, work: ParseWork = { steps: 0 }): void {
  const stack: Array<{ v: unknown; at: string }> = [{ v: doc, at: '' }];
  while (stack.length > 0) {
    const { v, at } = stack.pop()!;
    work.steps++;
    if (Array.isArray(v)) v.forEach((x, i) => stack.push({ v: x, at: `${at}/${i}` }));
    else if (isObject(v)) {
      for (const [k, x] of Object.entries(v)) {
        if (k === '$ref' && typeof x === 'string') resolveRef(doc, x, `${at}/$ref`);
        else stack.push({ v: x, at: `${at}/${pointerToken(k)}` });
      }
    }
  }
}

class Expander {
  private documentNodes = 0;
  private readonly doc: Record<string, unknown>;
  private readonly work: ParseWork;
  constructor(doc: Record<string, unknown>, work: ParseWork) {
    this.doc = doc;
    this.work = work;
  }

  /** `value` with its local `$ref`s expanded, within the budgets. */
  expand(value: unknown, at: string): unknown {
    const budget = { nodes: 0 };
    return this.walk(value, at, [], budget);
  }

  /** A `$ref` object (a parameter, a request body, a response) replaced by its target. */
  target(value: unknown, at: string): unknown {
    let cur = value;
    for (let hops = 0; isObject(cur) && typeof cur.$ref === 'string'; hops++) {
      if (hops > MAX_REF_NESTING) throw new DocumentProblem('$ref chain too long or circular', at);
      cur = resolveRef(this.doc, cur.$ref, at);
    }
    return cur;
  }

  private walk(v: unknown, at: string, active: string[], budget: { nodes: number }): unknown {
    budget.nodes++;
    this.documentNodes++;
    this.work.steps++;
    if (Array.isArray(v)) return v.map((x, i) => this.walk(x, `${at}/${i}`, active, budget));
    if (!isObject(v)) return v;
    if (typeof v.$ref === 'string') {
      const ref = v.$ref;
      if (active.includes(ref)) return { $circular: ref };
      if (active.length >= MAX_REF_NESTING || budget.nodes > MAX_SCHEMA_NODES || this.documentNodes > MAX_DOCUMENT_NODES) return { $ref: ref };
      const expanded = this.walk(resolveRef(this.doc, ref, `${at}/$ref`), ref, [...active, ref], budget);
      const siblings = Object.keys(v).filter((k) => k !== '$ref');
      if (siblings.length === 0 || !isObject(expanded)) return expanded;
      // OpenAPI 3.1 lets a $ref carry siblings (description, nullable): they apply on top.
      const out: Record<string, unknown> = { ...expanded };
      for (const k of siblings) out[k] = this.walk(v[k], `${at}/${pointerToken(k)}`, active, budget);
      return out;
    }
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) out[k] = this.walk(x, `${at}/${pointerToken(k)}`, active, budget);
    return out;
  }
}

const str = (v: unknown): string | null => (typeof v === 'string' ? v : typeof v === 'number' ? String(v) : null);

/** The schema of a `content` map: application/json first, then any +json type, then the first. */
function contentSchema(content: unknown): { schema: unknown; at: string } | undefined {
  if (!isObject(content)) return undefined;
  const types = Object.keys(content);
  const pick = types.find((t) => t.split(';')[0]!.trim().toLowerCase() === 'application/json') ?? types.find((t) => /\+json\s*(;|$)/i.test(t)) ?? types[0];
  if (pick === undefined) return undefined;
  const media = content[pick];
  return isObject(media) && media.schema !== undefined ? { schema: media.schema, at: `/content/${pointerToken(pick)}/schema` } : undefined;
}

/** The success response: the lowest 2xx code, then 2XX, then default. */
function successResponse(responses: unknown): { key: string; value: unknown } | undefined {
  if (!isObject(responses)) return undefined;
  const codes = Object.keys(responses);
  const key = codes.filter((c) => /^2\d\d$/.test(c)).sort()[0] ?? codes.find((c) => c.toUpperCase() === '2XX') ?? codes.find((c) => c === 'default');
  return key === undefined ? undefined : { key, value: responses[key] };
}

// Swagger 2.0 parameters carry their schema inline; these are its schema keywords.
const V2_SCHEMA_KEYS = [
  'type',
  'format',
  'items',
  'enum',
  'default',
  'minimum',
  'maximum',
  'exclusiveMinimum',
  'exclusiveMaximum',
  'minLength',
  'maxLength',
  'pattern',
  'minItems',
  'maxItems',
  'uniqueItems',
  'multipleOf',
  'collectionFormat',
];

function v2ParamSchema(p: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const k of V2_SCHEMA_KEYS) if (p[k] !== undefined) out[k] = p[k];
  return out;
}

function servers(doc: Record<string, unknown>, v2: boolean): Array<{ url: string; description: string | null }> {
  if (v2) {
    const host = str(doc.host);
    const basePath = str(doc.basePath) ?? '';
    if (host === null) return basePath === '' ? [] : [{ url: basePath, description: null }];
    const schemes = Array.isArray(doc.schemes) && doc.schemes.length > 0 ? doc.schemes.filter((s): s is string => typeof s === 'string') : ['https'];
    return schemes.map((s) => ({ url: `${s}://${host}${basePath}`, description: null }));
  }
  if (!Array.isArray(doc.servers)) return [];
  return doc.servers.filter(isObject).map((s) => {
    let url = str(s.url) ?? '';
    const vars = isObject(s.variables) ? s.variables : {};
    url = url.replace(/\{([^}]+)\}/g, (whole, name: string) => {
      const v = vars[name];
      return isObject(v) && str(v.default) !== null ? str(v.default)! : whole;
    });
    return { url, description: str(s.description) };
  });
}

const V2_FLOWS: Record<string, string> = { implicit: 'implicit', password: 'password', application: 'clientCredentials', accessCode: 'authorizationCode' };

function securitySchemes(doc: Record<string, unknown>, v2: boolean): Record<string, unknown> {
  if (!v2) {
    const c = isObject(doc.components) ? doc.components.securitySchemes : undefined;
    return isObject(c) ? c : {};
  }
  const defs = isObject(doc.securityDefinitions) ? doc.securityDefinitions : {};
  const out: Record<string, unknown> = {};
  for (const [name, d] of Object.entries(defs)) {
    if (!isObject(d)) continue;
    const description = str(d.description);
    let mapped: Record<string, unknown>;
    if (d.type === 'basic') mapped = { type: 'http', scheme: 'basic' };
    else if (d.type === 'apiKey') mapped = { type: 'apiKey', name: d.name, in: d.in };
    else if (d.type === 'oauth2') {
      const flow = V2_FLOWS[str(d.flow) ?? ''] ?? str(d.flow) ?? 'unknown';
      const f: Record<string, unknown> = { scopes: isObject(d.scopes) ? d.scopes : {} };
      if (d.authorizationUrl !== undefined) f.authorizationUrl = d.authorizationUrl;
      if (d.tokenUrl !== undefined) f.tokenUrl = d.tokenUrl;
      mapped = { type: 'oauth2', flows: { [flow]: f } };
    } else mapped = { ...d };
    if (description !== null) mapped.description = description;
    out[name] = mapped;
  }
  return out;
}

type Located = { p: Record<string, unknown>; at: string };

/** Path-level parameters, overridden by the operation's own of the same name and place, each with where it was written. */
function mergedParameters(x: Expander, shared: unknown[], own: unknown[], itemAt: string, at: string): Located[] {
  const merged = new Map<string, Located>();
  const add = (list: unknown[], base: string) =>
    list.forEach((raw, i) => {
      const p = x.target(raw, `${base}/${i}`);
      if (isObject(p) && typeof p.name === 'string' && typeof p.in === 'string') merged.set(`${p.in}\u0000${p.name}`, { p, at: `${base}/${i}` });
    });
  add(shared, `${itemAt}/parameters`);
  add(own, `${at}/parameters`);
  return [...merged.values()];
}

/** An operation's parameters with their schemas and, in Swagger 2.0, the request schema its body or formData parameters make (else null). */
function parameters(x: Expander, v2: boolean, merged: Located[]): { params: Param[]; requestSchema: unknown } {
  const params: Param[] = [];
  let requestSchema: unknown = null;
  const form: { properties: Record<string, unknown>; required: string[] } = { properties: {}, required: [] };
  for (const { p, at: pAt } of merged) {
    const name = p.name as string;
    const place = p.in as string;
    if (v2 && place === 'body') {
      requestSchema = x.expand(p.schema ?? null, `${pAt}/schema`);
      continue;
    }
    if (v2 && place === 'formData') {
      form.properties[name] = x.expand(v2ParamSchema(p), pAt);
      if (p.required === true) form.required.push(name);
      continue;
    }
    let schema: unknown = null;
    if (v2) schema = x.expand(v2ParamSchema(p), pAt);
    else if (p.schema !== undefined) schema = x.expand(p.schema, `${pAt}/schema`);
    else {
      const c = contentSchema(p.content);
      if (c) schema = x.expand(c.schema, `${pAt}${c.at}`);
    }
    params.push({ name, in: place, required: place === 'path' ? true : p.required === true, schema });
  }
  if (v2 && Object.keys(form.properties).length > 0 && requestSchema === null) {
    requestSchema = { type: 'object', properties: form.properties, ...(form.required.length > 0 ? { required: form.required } : {}) };
  }
  return { params, requestSchema };
}

/** An OpenAPI 3 operation's request body schema, or null. */
function requestBodySchema(x: Expander, op: Record<string, unknown>, at: string): unknown {
  if (op.requestBody === undefined) return null;
  const body = x.target(op.requestBody, `${at}/requestBody`);
  const c = isObject(body) ? contentSchema(body.content) : undefined;
  return c ? x.expand(c.schema, `${at}/requestBody${c.at}`) : null;
}

/** The schema of the operation's success response, or null. */
function responseSchema(x: Expander, v2: boolean, op: Record<string, unknown>, at: string): unknown {
  const success = successResponse(op.responses);
  if (!success) return null;
  const rAt = `${at}/responses/${pointerToken(success.key)}`;
  const r = x.target(success.value, rAt);
  if (!isObject(r)) return null;
  if (v2) return r.schema === undefined ? null : x.expand(r.schema, `${rAt}/schema`);
  const c = contentSchema(r.content);
  return c ? x.expand(c.schema, `${rAt}${c.at}`) : null;
}

/** One operation of a path item; its operation_ref must not be in `seen` yet. */
function operation(
  x: Expander,
  v2: boolean,
  path: string,
  method: string,
  op: Record<string, unknown>,
  where: { itemAt: string; at: string; shared: unknown[] },
  seen: Set<string>,
): Operation {
  const { itemAt, at, shared } = where;
  const merged = mergedParameters(x, shared, Array.isArray(op.parameters) ? op.parameters : [], itemAt, at);
  const { params, requestSchema: fromParameters } = parameters(x, v2, merged);
  const requestSchema = v2 ? fromParameters : requestBodySchema(x, op, at);
  const response = responseSchema(x, v2, op, at);
  const operationRef = typeof op.operationId === 'string' && op.operationId !== '' ? op.operationId : `${method.toUpperCase()} ${path}`;
  if (seen.has(operationRef))
    throw new DocumentProblem(`Two operations have the operation ref ${JSON.stringify(operationRef)}; operationIds must be unique`, `${at}/operationId`);
  seen.add(operationRef);
  for (const m of path.matchAll(/\{([^}]+)\}/g)) {
    if (!params.some((p) => p.in === 'path' && p.name === m[1]))
      throw new DocumentProblem(`The path parameter ${m[1]} of ${path} is not declared for ${method.toUpperCase()}`, at);
  }
  return {
    operation_ref: operationRef,
    method: method.toUpperCase(),
    path,
    params,
    request_schema: requestSchema,
    response_schema: response,
    request_fingerprint: fingerprint(requestSchema),
    response_fingerprint: fingerprint(response),
  };
}

/** The normalized fields of a document that parsed and validated. */
export function normalize(doc: Record<string, unknown>, work: ParseWork = { steps: 0 }, maxOperations = Infinity): NormalizedSpec {
  const v2 = typeof doc.swagger === 'string';
  const x = new Expander(doc, work);
  const info = isObject(doc.info) ? doc.info : {};
  const operations: Operation[] = [];
  const seen = new Set<string>();
  const paths = isObject(doc.paths) ? doc.paths : {};
  for (const [path, rawItem] of Object.entries(paths)) {
    const itemAt = `/paths/${pointerToken(path)}`;
    const item = x.target(rawItem, itemAt);
    if (!isObject(item)) continue;
    const shared = Array.isArray(item.parameters) ? item.parameters : [];
    for (const method of METHODS) {
      const op = item[method];
      if (!isObject(op)) continue;
      const at = `${itemAt}/${method}`;
      if (operations.length >= maxOperations)
        throw new DocumentProblem(
          `The document has more than ${maxOperations} operations, the most an API specification may have (API_SPEC_MAX_OPERATIONS)`,
          at,
        );
      operations.push(operation(x, v2, path, method, op, { itemAt, at, shared }, seen));
    }
  }
  return {
    openapi_version: str(v2 ? doc.swagger : doc.openapi),
    title: str(info.title),
    version: str(info.version),
    servers: servers(doc, v2),
    security_schemes: securitySchemes(doc, v2),
    operations,
  };
}

export interface SpecChanges {
  added: string[];
  removed: string[];
  changed: Array<{ operation_ref: string; request: boolean; response: boolean }>;
}

/** What a new version of a document changed in its operations (by operation_ref). */
export function diffOperations(before: readonly Operation[], after: readonly Operation[]): SpecChanges {
  const old = new Map(before.map((o) => [o.operation_ref, o]));
  const now = new Map(after.map((o) => [o.operation_ref, o]));
  const changes: SpecChanges = { added: [], removed: [], changed: [] };
  for (const [ref, o] of now) {
    const prev = old.get(ref);
    if (!prev) changes.added.push(ref);
    else {
      const request = prev.request_fingerprint !== o.request_fingerprint;
      const response = prev.response_fingerprint !== o.response_fingerprint;
      if (request || response) changes.changed.push({ operation_ref: ref, request, response });
    }
  }
  for (const ref of old.keys()) if (!now.has(ref)) changes.removed.push(ref);
  return changes;
}
