/**
 * The text side of a version diff, apart from the page so it runs anywhere (the tests run it
 * under Node): each version's steps written as YAML, and a line diff of two such texts.
 */
/** A step as the diff reads it (workflow-versions.ts's WorkflowStep has this shape). */
export interface StepText {
  key: string;
  type: string;
  config?: Record<string, unknown> | null;
}

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
  const breaks = /(?:\r?\n)*$/.exec(value)![0].split('\n').length - 1;
  if (breaks > 0) lines.pop();
  // Blank lines alone, or a last line of blanks with no break after it, read back as less
  // than they are: such a value stays one quoted line.
  if (!/\S/.test(value) || (breaks === 0 && /^[ \t]+$/.test(lines.at(-1) ?? ''))) return void out.push(`${lead}${JSON.stringify(value)}`);
  // Chomping: `-` drops the last line break, none keeps one, `+` keeps them all (and the one
  // after a line of blanks, which would otherwise count as trailing).
  const chomp = breaks === 0 ? '-' : breaks === 1 && /\S/.test(lines.at(-1) ?? '') ? '' : '+';
  // YAML takes the indentation from the first line that is not empty, unless told: say it
  // (two spaces deeper than the key, as emit nests) when that line starts with a space.
  const indicator = lines.find((l) => l !== '')?.startsWith(' ') ? '2' : '';
  out.push(`${lead}|${indicator}${chomp}`);
  for (const line of lines) out.push(line === '' ? '' : `${indent}${line}`);
}

/** The steps as YAML-like lines: key and type first, then the config. */
export function stepsText(steps: StepText[]): string[] {
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
