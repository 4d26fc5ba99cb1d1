/**
 * Reading a config member by member, each problem at its JSON pointer, so a client can
 * show the error beside the input that caused it. Used by the step types' validate and by
 * the workflow definition (workflows/definition.ts) for the rest of the builder state.
 */
import { quoteName } from '../errors.ts';
import { isObject, pointerToken } from '../json.ts';
import { compileExpression } from '../expressions/expressions.ts';
import type { Checked } from './step.ts';

/** Objects of name: expression (mapping, params, query, headers) name at most this many members. */
export const MAX_MAPPING_FIELDS = 200;

/** The first problem found, at its pointer: readers stop there. */
export class ConfigIssue extends Error {
  readonly pointer: string;
  constructor(pointer: string, detail: string) {
    super(detail);
    this.pointer = pointer;
  }
}

/** A reader's result as a step type's validate gives it. */
export function checked<Config>(read: () => Config): Checked<Config> {
  try {
    return { ok: true, config: read() };
  } catch (err) {
    if (err instanceof ConfigIssue) return { ok: false, issues: [{ pointer: err.pointer, detail: err.message }] };
    throw err;
  }
}

export function onlyMembers(obj: Record<string, unknown>, allowed: readonly string[], at: string, what: string): void {
  for (const k of Object.keys(obj)) {
    if (!allowed.includes(k)) throw new ConfigIssue(`${at}/${k}`, `${quoteName(k)} is not a member of ${what} (allowed: ${allowed.join(', ')})`);
  }
}

export function text(obj: Record<string, unknown>, name: string, at: string, opts: { required: boolean; max: number }): string | null {
  const v = obj[name];
  if (v === undefined || v === null) {
    if (opts.required) throw new ConfigIssue(`${at}/${name}`, `${name} is required`);
    return null;
  }
  if (typeof v !== 'string' || !v.isWellFormed() || v.includes('\0')) throw new ConfigIssue(`${at}/${name}`, `${name} must be a string`);
  if (opts.required && v.trim() === '') throw new ConfigIssue(`${at}/${name}`, `${name} must not be empty`);
  if (v.length > opts.max) throw new ConfigIssue(`${at}/${name}`, `${name} must be at most ${opts.max} characters`);
  return v;
}

export function expression(obj: Record<string, unknown>, name: string, at: string, required: boolean): string | null {
  const v = obj[name];
  if (v === undefined || v === null) {
    if (required) throw new ConfigIssue(`${at}/${name}`, `${name} is required (a JSONata expression)`);
    return null;
  }
  if (typeof v !== 'string') throw new ConfigIssue(`${at}/${name}`, `${name} must be a JSONata expression (a string)`);
  const r = compileExpression(v);
  if (!r.ok) throw new ConfigIssue(`${at}/${name}`, `${name} ${r.reason}`);
  return v;
}

/** An object of name: expression; `names` checks each name (its pointer given). */
export function expressionMap(
  config: Record<string, unknown>,
  name: string,
  at: string,
  names?: (k: string, pointer: string) => void,
): Record<string, string> | undefined {
  const v = config[name];
  if (v === undefined || v === null) return undefined;
  if (!isObject(v)) throw new ConfigIssue(`${at}/${name}`, `${name} must be an object of name: expression`);
  const entries = Object.keys(v);
  if (entries.length > MAX_MAPPING_FIELDS) throw new ConfigIssue(`${at}/${name}`, `${name} may name at most ${MAX_MAPPING_FIELDS} members`);
  const out: Record<string, string> = {};
  for (const k of entries) {
    const kat = `${at}/${name}/${pointerToken(k)}`;
    if (k === '' || k.length > 128) throw new ConfigIssue(kat, `a name in ${name} must be 1-128 characters`);
    names?.(k, kat);
    out[k] = expression(v, k, `${at}/${name}`, true)!;
  }
  return out;
}

/** The members of an object of name: expression, with their pointers under `name`. */
export const membersOf = (name: string, map: Record<string, string> | undefined): Array<[string, string]> =>
  Object.entries(map ?? {}).map(([k, e]) => [`${name}/${pointerToken(k)}`, e]);

/** A config of one member, `expression` (transform, condition). */
export const oneExpression = (config: Record<string, unknown>, type: string): Checked<{ expression: string }> =>
  checked(() => {
    onlyMembers(config, ['expression'], '', `a ${type} step's config`);
    return { expression: expression(config, 'expression', '', true)! };
  });
