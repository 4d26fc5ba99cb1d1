/**
 * An http_request step's call, from its evaluated parts: with an operation_ref, the
 * operation of the connector's specification says the method, the path and where each
 * parameter goes; with method + path, params fill the path's {name} placeholders.
 */
import { isObject } from '../json.ts';
import { RequestProblem } from './errors.ts';
import type { HttpCall } from './runtime.ts';

export interface SpecParam {
  name: string;
  in: string;
  required: boolean;
}

export interface SpecOperation {
  operation_ref: string;
  method: string;
  path: string;
  params: SpecParam[];
}

export function operationOf(operations: unknown[] | null | undefined, ref: string): SpecOperation | undefined {
  const op = (operations ?? []).find((o) => isObject(o) && o.operation_ref === ref);
  return op as SpecOperation | undefined;
}

/** Operations named in a "there is no such operation" text; a specification may hold hundreds. */
export const OPERATIONS_LISTED = 20;

/** The operation_refs of a specification's operations, in its order. */
export function operationRefs(operations: unknown[] | null | undefined): string[] {
  return (operations ?? []).flatMap((o) => (isObject(o) && typeof o.operation_ref === 'string' ? [o.operation_ref] : []));
}

/** `a, b, c`, or the first OPERATIONS_LISTED and `and N more`. */
export function listOperations(refs: readonly string[], max = OPERATIONS_LISTED): string {
  if (refs.length === 0) return 'none';
  const shown = refs.slice(0, max).join(', ');
  return refs.length > max ? `${shown} and ${refs.length - max} more` : shown;
}

/**
 * Why `ref` names no operation, saying which do exist, for a step's save, its call and
 * verification alike. `operations` is null when no specification is attached.
 */
export function unknownOperationText(ref: string, operations: unknown[] | null | undefined): string {
  if (operations === null || operations === undefined)
    return `${JSON.stringify(ref)} cannot be looked up: the connector has no api_spec attached (attach one, or give method and path)`;
  return `${JSON.stringify(ref)} is not an operation of the connector's specification; its operations: ${listOperations(operationRefs(operations))}`;
}

/** Why `ref` is not an operation of a driver (s3, snowflake), listing those it performs. */
export function unknownDriverOperationText(type: string, ref: string | undefined, ops: readonly string[]): string {
  const why = ref === undefined ? 'give one as operation_ref' : `${JSON.stringify(ref)} is not one of them`;
  return `${type === 's3' ? 'An' : 'A'} ${type} connector performs ${listOperations(ops)}: ${why}`;
}

/** A value a step computed for a parameter or header: a scalar, as text. */
export type Scalars = Record<string, string>;

/** The text a value becomes after up to `rounds` percent-decodings: what a provider that decodes again would see. */
function decodings(value: string, rounds = 4): string[] {
  const out = [value];
  let v = value;
  for (let i = 0; i < rounds && v.includes('%'); i++) {
    try {
      v = decodeURIComponent(v);
    } catch {
      break;
    }
    out.push(v);
  }
  return out;
}

/**
 * A path parameter's value as one path segment. encodeURIComponent escapes `/`, `\`, `?`
 * and `#`, but leaves dots: a value of `.` or `..` (or one that decodes to them, `%2e%2E`)
 * would be a dot segment the URL parser or the provider resolves, moving the call to
 * another of the provider's endpoints. An empty value would leave `//`, which some servers
 * fold into one slash.
 */
function segment(name: string, value: string): string {
  if (value === '') throw new RequestProblem(`The path parameter ${name} is empty; a path parameter must be a non-empty path segment`);
  if (decodings(value).some((v) => v === '.' || v === '..')) {
    throw new RequestProblem(
      `The path parameter ${name} is ${JSON.stringify(value.slice(0, 40))}, a dot segment that would move the request to another path; it is refused`,
    );
  }
  return encodeURIComponent(value);
}

/** The template with its placeholders filled: segment rules before its `?`, plain encoding in a query it carries. */
function fill(template: string, params: Scalars, what: string): string {
  const at = template.indexOf('?');
  const [path, query] = at < 0 ? [template, ''] : [template.slice(0, at), template.slice(at)];
  const filled = (text: string, encode: (name: string, v: string) => string) =>
    text.replace(/\{([^}]+)\}/g, (_whole, name: string) => {
      const v = params[name];
      if (v === undefined) throw new RequestProblem(`${what} needs the path parameter ${name}, and params gave no value for it`);
      return encode(name, v);
    });
  return filled(path, segment) + filled(query, (_name, v) => encodeURIComponent(v));
}

export function buildCall(
  target: { operation: SpecOperation } | { method: string; path: string },
  parts: { params: Scalars; query: Scalars; headers: Scalars; body: unknown },
  idempotencyKey: string,
): HttpCall {
  const query: Scalars = { ...parts.query };
  const headers: Scalars = { ...parts.headers };
  if ('operation' in target) {
    const op = target.operation;
    for (const p of op.params) {
      const v = parts.params[p.name];
      if (v === undefined) {
        if (p.required) throw new RequestProblem(`The operation ${op.operation_ref} requires ${p.name} (${p.in}), and params gave no value for it`);
        continue;
      }
      if (p.in === 'query') query[p.name] = v;
      else if (p.in === 'header') headers[p.name] = v;
    }
    const declared = new Set(op.params.map((p) => p.name));
    const unknown = Object.keys(parts.params).find((k) => !declared.has(k));
    if (unknown !== undefined) throw new RequestProblem(`${unknown} is not a parameter of the operation ${op.operation_ref}`);
    return {
      method: op.method,
      path: fill(op.path, parts.params, `The operation ${op.operation_ref}`),
      template: op.path,
      query,
      headers,
      body: parts.body,
      idempotencyKey,
    };
  }
  return { method: target.method, path: fill(target.path, parts.params, 'The path'), template: target.path, query, headers, body: parts.body, idempotencyKey };
}
