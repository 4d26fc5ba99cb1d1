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

/** A value a step computed for a parameter or header: a scalar, as text. */
export type Scalars = Record<string, string>;

const fill = (path: string, params: Scalars, what: string) =>
  path.replace(/\{([^}]+)\}/g, (_whole, name: string) => {
    const v = params[name];
    if (v === undefined) throw new RequestProblem(`${what} needs the path parameter ${name}, and params gave no value for it`);
    return encodeURIComponent(v);
  });

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
    return { method: op.method, path: fill(op.path, parts.params, `The operation ${op.operation_ref}`), query, headers, body: parts.body, idempotencyKey };
  }
  return { method: target.method, path: fill(target.path, parts.params, 'The path'), query, headers, body: parts.body, idempotencyKey };
}
