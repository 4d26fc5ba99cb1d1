/**
 * Schedule triggers' time: a cron expression of five fields (minute first) or six (second
 * first), read in an IANA time zone. A second is the finest step, so a schedule fires at
 * most once a second. Which process fires a tick is decided in schedule.sql.ts.
 */
import { Cron } from 'croner';

export const CATCH_UP = ['latest', 'none'] as const;
export type CatchUp = (typeof CATCH_UP)[number];
export const DEFAULT_CATCH_UP: CatchUp = 'latest';
export const DEFAULT_TIMEZONE = 'UTC';

export interface Schedule {
  cron: string;
  timezone: string;
}

/** An IANA zone name Intl knows (croner reads zones through Intl). */
export function isTimeZone(tz: string): boolean {
  try {
    new Intl.DateTimeFormat('en', { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}

const cache = new Map<string, Cron>();

function cronOf(s: Schedule): Cron {
  const k = `${s.timezone}\n${s.cron}`;
  let c = cache.get(k);
  if (!c) {
    c = new Cron(s.cron, { timezone: s.timezone, mode: '5-or-6-parts', paused: true });
    // Patterns are few (one per saved schedule); the cap only bounds a process that sees many.
    if (cache.size >= 1000) cache.clear();
    cache.set(k, c);
  }
  return c;
}

/**
 * Why the schedule cannot be saved, or undefined when it can. A pattern without a year
 * repeats within 28 years, so one that names no instant after 1970 never fires (30 February).
 */
export function scheduleProblem(s: Schedule): string | undefined {
  if (!isTimeZone(s.timezone)) return `timezone ${JSON.stringify(s.timezone)} is not an IANA time zone name (such as "Europe/Berlin" or "UTC")`;
  let c: Cron;
  try {
    c = new Cron(s.cron, { timezone: s.timezone, mode: '5-or-6-parts', paused: true });
  } catch (err) {
    return `cron is not a cron expression of 5 fields (minute hour day month weekday) or 6 (second first): ${(err as Error).message.replace(/^CronPattern: /, '')}`;
  }
  if (c.nextRun(new Date(0)) === null) return 'cron names no instant (such as 30 February)';
  return undefined;
}

/** Ticks sampled by shortestInterval from each start: a few of the pattern's cycles for any pattern finer than a day. */
const INTERVAL_SAMPLE = 400;

/**
 * The shortest time between two ticks, in milliseconds, as sampled from `now` and from the
 * start of its year (so a gap across a month's or a year's end is seen); undefined when the
 * schedule fires at most once in the sample. Read at save time only.
 */
export function shortestInterval(s: Schedule, now: Date): number | undefined {
  let shortest: number | undefined;
  for (const from of [now, new Date(Date.UTC(now.getUTCFullYear(), 0, 1) - 86_400_000)]) {
    let prev = nextTick(s, from);
    for (let i = 0; prev !== null && i < INTERVAL_SAMPLE; i++) {
      const t = nextTick(s, prev);
      if (t === null) break;
      const gap = t.getTime() - prev.getTime();
      if (shortest === undefined || gap < shortest) shortest = gap;
      prev = t;
    }
  }
  return shortest;
}

/** The first tick strictly after `at`, or null when there is none. */
export function nextTick(s: Schedule, at: Date): Date | null {
  return cronOf(s).nextRun(at);
}

/** The latest tick at or before `at`, or null. */
export function latestTick(s: Schedule, at: Date): Date | null {
  return cronOf(s).previousRuns(1, new Date(at.getTime() + 1))[0] ?? null;
}

/** The ticks strictly after `after` and at or before `upTo`, oldest first, at most `max`. */
export function ticksBetween(s: Schedule, after: Date, upTo: Date, max: number): Date[] {
  const out: Date[] = [];
  let t = nextTick(s, after);
  while (t !== null && t.getTime() <= upTo.getTime() && out.length < max) {
    out.push(t);
    t = nextTick(s, t);
  }
  return out;
}
