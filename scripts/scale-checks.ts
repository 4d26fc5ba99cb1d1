/**
 * The arithmetic of the scale-out run's checks (scripts/scale-test.ts), apart from the run
 * itself so that a test can hold it to account: reading a Prometheus exposition, and
 * whether events whose window is known only within a range could all have fit a limit.
 */

/** One sample of the Prometheus text format. */
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** The samples of a text-format exposition (comments and blank lines skipped). */
export function parseExposition(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) throw new Error(`not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g))
      labels[l[1]!] = l[2]!.replace(/\\(.)/g, (_s, c: string) => (c === 'n' ? '\n' : c));
    out.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return out;
}

/** The sum of the samples of `name` whose labels include every pair of `match`. */
export function sumOf(samples: readonly Sample[], name: string, match: Record<string, string> = {}): number {
  let total = 0;
  for (const s of samples) if (s.name === name && Object.entries(match).every(([k, v]) => s.labels[k] === v)) total += s.value;
  return total;
}

/** A min-heap of numbers. */
class MinHeap {
  private readonly a: number[] = [];
  get size(): number {
    return this.a.length;
  }
  peek(): number {
    return this.a[0]!;
  }
  push(v: number): void {
    const a = this.a;
    a.push(v);
    for (let i = a.length - 1; i > 0;) {
      const p = (i - 1) >> 1;
      if (a[p]! <= a[i]!) break;
      [a[p], a[i]] = [a[i]!, a[p]!];
      i = p;
    }
  }
  pop(): number {
    const a = this.a;
    const top = a[0]!;
    const last = a.pop()!;
    if (a.length > 0) {
      a[0] = last;
      for (let i = 0; ;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < a.length && a[l]! < a[m]!) m = l;
        if (r < a.length && a[r]! < a[m]!) m = r;
        if (m === i) break;
        [a[m], a[i]] = [a[i]!, a[m]!];
        i = m;
      }
    }
    return top;
  }
}

/**
 * Events of which we know only a range of fixed windows each fell in (`[first, last]`,
 * window numbers), under a limit of `capacity` per window: how many of them no assignment
 * can fit. 0 means some assignment of every event to a window of its range keeps every
 * window within the limit, so the observations do not show the limit broken; more than 0
 * proves it was broken, by at least that many events.
 *
 * Earliest deadline first, window by window: each window takes, up to its capacity, the
 * waiting events whose range ends soonest. For unit events on windows of equal capacity
 * this is exact: it places every event whenever any assignment can, and what it leaves
 * unplaced is the fewest any assignment leaves.
 */
export function unplaceable(ranges: ReadonlyArray<readonly [number, number]>, capacity: number): number {
  const events = [...ranges].sort((x, y) => x[0] - y[0]);
  const waiting = new MinHeap();
  let missed = 0;
  let i = 0;
  let slot = events.length > 0 ? events[0]![0] : 0;
  while (i < events.length || waiting.size > 0) {
    if (waiting.size === 0 && events[i]![0] > slot) slot = events[i]![0];
    while (i < events.length && events[i]![0] <= slot) waiting.push(events[i++]![1]);
    while (waiting.size > 0 && waiting.peek() < slot) {
      waiting.pop();
      missed++;
    }
    for (let k = 0; k < capacity && waiting.size > 0; k++) waiting.pop();
    slot++;
  }
  return missed;
}

/** The most events in one window, each counted in window floor(t / sizeMs). */
export function maxPerWindow(times: readonly number[], sizeMs: number): number {
  const counts = new Map<number, number>();
  let max = 0;
  for (const t of times) {
    const w = Math.floor(t / sizeMs);
    const n = (counts.get(w) ?? 0) + 1;
    counts.set(w, n);
    if (n > max) max = n;
  }
  return max;
}
