/**
 * A workflow's steps as the rows the flow draws, nested steps under their parent (apart from
 * the page so it runs under Node): a switch's cases and default as branches, a for_each's
 * steps as a loop, waits (delay, wait_until, wait_for_delivery) said with what they wait for,
 * and a wait_for_delivery's on_timeout steps as a branch. Configs as docs/workflows.md has them.
 */
export interface FlowStep {
  key: string;
  type: string;
  config?: Record<string, unknown> | null;
}

export type FlowRow = { kind: 'step'; step: FlowStep; depth: number; note?: string } | { kind: 'branch'; label: string; depth: number };

export const WAIT_TYPES = ['delay', 'wait_until', 'wait_for_delivery'] as const;

function cut(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

function stepsOf(v: unknown): FlowStep[] {
  return Array.isArray(v) ? (v.filter((s) => s && typeof s === 'object' && typeof (s as FlowStep).key === 'string') as FlowStep[]) : [];
}

/** What a step does beyond its type, in a few words: the wait's time, the loop's items. */
export function stepNote(s: FlowStep): string | undefined {
  const c = s.config ?? {};
  const str = (v: unknown) => (typeof v === 'string' ? cut(v, 40) : JSON.stringify(v));
  switch (s.type) {
    case 'condition':
      return 'a false value stops the run here; later steps are skipped';
    case 'switch':
      return `branches: ${Array.isArray(c.cases) ? c.cases.length : 0} cases and a default; the first true case runs`;
    case 'for_each':
      return `loop: its steps run for each item of ${str(c.items)}${typeof c.concurrency === 'number' ? `, ${c.concurrency} at once` : ''}`;
    case 'delay':
      return `waits ${str(c.duration)}`;
    case 'wait_until':
      return `waits until ${str(c.at)}`;
    case 'wait_for_delivery':
      return `waits for a delivery on ${str(c.trigger)} where ${str(c.match)}, at most ${str(c.timeout)}; then ${
        Array.isArray(c.on_timeout) ? 'its on-timeout steps' : c.on_timeout === 'continue' ? 'goes on' : 'fails'
      } on timeout`;
    default:
      return undefined;
  }
}

export function flowRows(steps: FlowStep[], depth = 0, out: FlowRow[] = []): FlowRow[] {
  for (const s of steps) {
    const note = stepNote(s);
    out.push({ kind: 'step', step: s, depth, ...(note ? { note } : {}) });
    const c = s.config ?? {};
    if (s.type === 'switch') {
      (Array.isArray(c.cases) ? c.cases : []).forEach((k: unknown, i: number) => {
        const when = k && typeof k === 'object' ? (k as { when?: unknown }).when : undefined;
        out.push({ kind: 'branch', label: `case ${i + 1}: when ${typeof when === 'string' ? cut(when, 48) : '?'}`, depth: depth + 1 });
        flowRows(stepsOf(k && typeof k === 'object' ? (k as { steps?: unknown }).steps : undefined), depth + 1, out);
      });
      out.push({ kind: 'branch', label: 'default', depth: depth + 1 });
      flowRows(stepsOf(c.default), depth + 1, out);
    } else if (s.type === 'for_each' && Array.isArray(c.steps)) {
      out.push({ kind: 'branch', label: 'for each item', depth: depth + 1 });
      flowRows(stepsOf(c.steps), depth + 1, out);
    } else if (s.type === 'wait_for_delivery' && Array.isArray(c.on_timeout)) {
      out.push({ kind: 'branch', label: 'on timeout', depth: depth + 1 });
      flowRows(stepsOf(c.on_timeout), depth + 1, out);
    }
  }
  return out;
}
