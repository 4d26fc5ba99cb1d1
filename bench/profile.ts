/**
 * A CPU profile of this process's main thread (the servers') over one measured run, by the
 * inspector's sampling profiler, summarised as the functions with the most self time.
 * BENCH_CPU_PROFILE=N prints the top N per scenario (and returns them to the caller);
 * BENCH_CPU_PROFILE_DIR keeps each .cpuprofile for a viewer (Chrome DevTools, speedscope).
 * The load generator runs in a worker thread, which this session does not sample.
 */
import fs from 'node:fs';
import path from 'node:path';
import { Session } from 'node:inspector/promises';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
}
interface Profile {
  nodes: ProfileNode[];
  samples?: number[];
  timeDeltas?: number[];
  startTime: number;
  endTime: number;
}

export interface SelfTime {
  name: string;
  /** Share of the samples of the run, 0..1. */
  share: number;
}

const TOP = Number(process.env.BENCH_CPU_PROFILE ?? 0);
const DIR = process.env.BENCH_CPU_PROFILE_DIR;

let session: Session | undefined;

/** Starts sampling when BENCH_CPU_PROFILE is set; the returned stop gives the top self-time items. */
export async function startProfile(label: string): Promise<() => Promise<SelfTime[] | undefined>> {
  if (!(TOP > 0)) return async () => undefined;
  if (!session) {
    session = new Session();
    session.connect();
    await session.post('Profiler.enable');
    await session.post('Profiler.setSamplingInterval', { interval: 200 });
  }
  const s = session;
  await s.post('Profiler.start');
  return async () => {
    const { profile } = (await s.post('Profiler.stop')) as { profile: Profile };
    if (DIR) {
      fs.mkdirSync(DIR, { recursive: true });
      fs.writeFileSync(path.join(DIR, `${label.replace(/[^\w.-]+/g, '_').slice(0, 80)}.cpuprofile`), JSON.stringify(profile));
    }
    return topSelf(profile, TOP);
  };
}

function shortUrl(url: string): string {
  const i = url.indexOf('/node_modules/');
  if (i >= 0) return url.slice(i + '/node_modules/'.length);
  const s = url.indexOf('/src/');
  if (s >= 0) return url.slice(s + 1);
  return url.replace(/^.*\//, '');
}

/** Self samples per function (name and place), largest first; idle and the GC kept as V8 names them. */
export function topSelf(profile: Profile, n: number): SelfTime[] {
  const by = new Map<string, number>();
  let total = 0;
  for (const node of profile.nodes) {
    const hits = node.hitCount ?? 0;
    if (hits === 0) continue;
    const f = node.callFrame;
    const key = f.url ? `${f.functionName || '(anonymous)'} ${shortUrl(f.url)}:${f.lineNumber + 1}` : f.functionName;
    by.set(key, (by.get(key) ?? 0) + hits);
    total += hits;
  }
  // Idle is time the thread waited, not work: shares are of the busy samples.
  const idle = by.get('(idle)') ?? 0;
  by.delete('(idle)');
  const busy = total - idle;
  return [...by.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([name, hits]) => ({ name, share: busy > 0 ? hits / busy : 0 }));
}
