/**
 * The difference between the steps of two versions: each version written as YAML-like text,
 * compared line by line with a longest common subsequence; a string of several lines (an
 * expression) is written as a block, a line each. Added and removed lines carry
 * `+` and `−` in their text, so the meaning never rests on colour alone.
 */
import type { WorkflowStep, WorkflowVersion } from './workflow-versions.ts';
import { Empty } from '../ui/index.tsx';

/** A scalar as YAML would accept it: strings quoted as JSON, so an expression's quotes stay readable. */
function scalar(v: unknown): string {
  if (v === null || v === undefined) return 'null';
  if (typeof v === 'string') return /^[A-Za-z_][\w.-]*$/.test(v) && !['true', 'false', 'null'].includes(v) ? v : JSON.stringify(v);
  return JSON.stringify(v);
}

function emit(value: unknown, indent: string, out: string[], lead: string): void {
  if (Array.isArray(value)) {
    if (value.length === 0) return void out.push(`${lead}[]`);
    if (lead.trim() !== '') out.push(lead.trimEnd());
    for (const item of value) emit(item, `${indent}  `, out, `${indent}- `);
    return;
  }
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>);
    if (entries.length === 0) return void out.push(`${lead}{}`);
    let first = true;
    // The first member of a list item shares the `- ` line, as YAML writes it.
    const inline = lead.endsWith('- ');
    if (!inline && lead.trim() !== '') out.push(lead.trimEnd());
    for (const [k, v] of entries) {
      const prefix = inline && first ? lead : indent;
      first = false;
      const composite = v !== null && typeof v === 'object' && (Array.isArray(v) ? v.length > 0 : Object.keys(v).length > 0);
      if (composite) emit(v, `${indent}  `, out, `${prefix}${k}:`);
      else emit(v, `${indent}  `, out, `${prefix}${k}: `);
    }
    return;
  }
  if (typeof value === 'string' && /[\r\n]/.test(value)) return void block(value, indent, out, lead);
  out.push(`${lead}${scalar(value)}`);
}

/**
 * A string of several lines (a JSONata expression, say) as a YAML block scalar: one text
 * line per line of the value, its whitespace kept, so the diff compares the expression's
 * own lines instead of one long JSON string with its newlines escaped.
 */
function block(value: string, indent: string, out: string[], lead: string): void {
  const lines = value.split(/\r?\n/);
  const keep = lines.at(-1) === '';
  if (keep) lines.pop();
  out.push(`${lead}|${keep ? '' : '-'}`);
  for (const line of lines) out.push(line === '' ? '' : `${indent}${line}`);
}

/** The steps as YAML-like lines: key and type first, then the config. */
export function stepsText(steps: WorkflowStep[]): string[] {
  const out: string[] = [];
  for (const s of steps) emit({ key: s.key, type: s.type, config: s.config ?? {} }, '  ', out, '- ');
  return out;
}

export type DiffLine = { op: ' ' | '+' | '-'; text: string };

/** A line diff by longest common subsequence (a table of lengths, then one walk back). */
export function lineDiff(a: string[], b: string[]): DiffLine[] {
  const n = a.length;
  const m = b.length;
  const len = new Uint32Array((n + 1) * (m + 1));
  const at = (i: number, j: number) => i * (m + 1) + j;
  for (let i = n - 1; i >= 0; i--)
    for (let j = m - 1; j >= 0; j--) len[at(i, j)] = a[i] === b[j] ? len[at(i + 1, j + 1)]! + 1 : Math.max(len[at(i + 1, j)]!, len[at(i, j + 1)]!);
  const out: DiffLine[] = [];
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (a[i] === b[j]) {
      out.push({ op: ' ', text: a[i]! });
      i++;
      j++;
    } else if (len[at(i + 1, j)]! >= len[at(i, j + 1)]!) out.push({ op: '-', text: a[i++]! });
    else out.push({ op: '+', text: b[j++]! });
  }
  while (i < n) out.push({ op: '-', text: a[i++]! });
  while (j < m) out.push({ op: '+', text: b[j++]! });
  return out;
}

/** `2..5` as two version numbers, or undefined. */
export function parseDiff(value: string | null): [number, number] | undefined {
  const m = /^(\d+)\.\.(\d+)$/.exec(value ?? '');
  return m ? [Number(m[1]), Number(m[2])] : undefined;
}

const SIGN = { ' ': ' ', '+': '+', '-': '−' } as const;
const CLASS = { ' ': 'same', '+': 'added', '-': 'removed' } as const;

export function VersionDiff(props: { from: WorkflowVersion; to: WorkflowVersion }) {
  const lines = lineDiff(stepsText(props.from.steps), stepsText(props.to.steps));
  const added = lines.filter((l) => l.op === '+').length;
  const removed = lines.filter((l) => l.op === '-').length;
  return (
    <div class="wf-diff">
      <p>
        From version {props.from.version} to version {props.to.version}: {added} {added === 1 ? 'line' : 'lines'} added (+), {removed}{' '}
        {removed === 1 ? 'line' : 'lines'} removed (−).
      </p>
      {added + removed === 0 ? (
        <Empty>The two versions have the same steps.</Empty>
      ) : (
        <pre class="diff" tabIndex={0} aria-label={`Steps, version ${props.from.version} to ${props.to.version}`}>
          {lines.map((l) => (
            <span class={`diff-line ${CLASS[l.op]}`}>
              {SIGN[l.op]} {l.text}
              {'\n'}
            </span>
          ))}
        </pre>
      )}
    </div>
  );
}
