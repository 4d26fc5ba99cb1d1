/**
 * Expressions that are a bare path of plain names (`payload`, `payload.order.id`), read in
 * the process without the expression pool. Sending a step's input to a child process and
 * its result back costs more than the rest of an http_request step's own work (issue 25);
 * such a path cannot loop or grow, so it needs none of the pool's budgets.
 *
 * Only what reads the same as JSONata is answered here: every value on the way an object
 * that is no array, and a result that is no array (JSONata's sequences flatten arrays along
 * a path). Anything else is left to the pool: undefined means "not decided here".
 */

const PLAIN_PATH = /^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*$/;
// Words JSONata reads as operators or literals, not as field names.
const RESERVED = new Set(['and', 'or', 'in', 'true', 'false', 'null', 'function']);

const isRecord = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/** `{value}` when `expression` is a plain path whose result over `input` is JSONata's; undefined otherwise. */
export function plainPath(expression: string, input: unknown): { value: unknown } | undefined {
  if (expression.length > 256 || !PLAIN_PATH.test(expression)) return undefined;
  const names = expression.split('.');
  if (names.some((n) => RESERVED.has(n))) return undefined;
  let v: unknown = input;
  for (const name of names) {
    if (!isRecord(v)) return undefined;
    if (!Object.hasOwn(v, name)) return { value: undefined };
    v = v[name];
  }
  if (Array.isArray(v) || typeof v === 'function') return undefined;
  return { value: v };
}
