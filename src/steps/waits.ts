/**
 * What the three waits share (docs/workflows.md, "Waits"): reading a duration, the longest
 * wait, and parking until an instant. A wait parks its run (steps/step.ts Park) through
 * `effects.wait`: a run's real effects park it, a test run's dry ones say when it would
 * resume and go on at once.
 */
import { permanentFailure } from '../errors.ts';
import { ConfigIssue } from './config.ts';
import type { Effects, WaitKind } from './effects.ts';
import type { StepContext, StepResult } from './step.ts';

/** The longest a run may wait in one step: 366 days, so "a year from now" always fits. */
export const MAX_WAIT_SECONDS = 366 * 86_400;
export const MAX_WAIT_MS = MAX_WAIT_SECONDS * 1000;

const UNIT_MS: Record<string, number> = { d: 86_400_000, h: 3_600_000, m: 60_000, s: 1000, ms: 1 };
// "10s", "10m", "1h30m", "2d", "1d12h", "500ms": units from the largest down, each at most once.
const SHORT = /^(?:(\d+(?:\.\d+)?)d)?(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m(?!s))?(?:(\d+(?:\.\d+)?)s)?(?:(\d+)ms)?$/;
// ISO 8601 durations of days and times: P2D, PT10M, P1DT2H30M, PT0.5S (no years or months: their length depends on when).
const ISO = /^P(?:(\d+(?:\.\d+)?)D)?(?:T(?:(\d+(?:\.\d+)?)H)?(?:(\d+(?:\.\d+)?)M)?(?:(\d+(?:\.\d+)?)S)?)?$/i;

/** A duration's milliseconds, or why it is not one: "10m", "1h30m", "2d", "PT10M", or a number of seconds. */
export function durationMs(v: unknown): number | string {
  let ms: number | undefined;
  if (typeof v === 'number') ms = Number.isFinite(v) && v >= 0 ? Math.round(v * 1000) : undefined;
  else if (typeof v === 'string') {
    const t = v.trim();
    const short = t === '' ? null : SHORT.exec(t);
    const iso = short || t.length < 2 ? null : ISO.exec(t);
    if (short) ms = ['d', 'h', 'm', 's', 'ms'].reduce((sum, u, i) => sum + Number(short[i + 1] ?? 0) * UNIT_MS[u]!, 0);
    else if (iso && iso.slice(1).some((x) => x !== undefined)) ms = ['d', 'h', 'm', 's'].reduce((sum, u, i) => sum + Number(iso[i + 1] ?? 0) * UNIT_MS[u]!, 0);
    else if (/^\d+(\.\d+)?$/.test(t)) ms = Number(t) * 1000;
    if (ms !== undefined) ms = Math.round(ms);
  }
  if (ms === undefined) return `${JSON.stringify(v) ?? 'nothing'} is not a duration (such as "10m", "1h30m", "2d", "PT10M", or a number of seconds)`;
  if (ms > MAX_WAIT_MS) return `${JSON.stringify(v)} is longer than the longest wait, ${MAX_WAIT_SECONDS / 86_400} days`;
  return ms;
}

/** The value of an expression that is a literal (a quoted string or a number), or undefined: a literal can be checked at save. */
export function literalOf(expression: string): { value: unknown } | undefined {
  const t = expression.trim();
  if (/^-?\d+(\.\d+)?$/.test(t)) return { value: Number(t) };
  if (/^"(?:[^"\\]|\\.)*"$/.test(t)) {
    try {
      return { value: JSON.parse(t) };
    } catch {
      return undefined;
    }
  }
  if (/^'[^'\\]*'$/.test(t)) return { value: t.slice(1, -1) };
  return undefined;
}

/** A duration given as an expression: a literal one is checked at save. */
export function checkLiteralDuration(expression: string, pointer: string): void {
  const lit = literalOf(expression);
  if (lit === undefined) return;
  const ms = durationMs(lit.value);
  if (typeof ms === 'string') throw new ConfigIssue(pointer, ms);
}

/** What a delay or wait_until resumed after: the instant it waited until. */
export interface TimeWaitState {
  until: string;
}

/**
 * Waits until `until` (a delay's, a wait_until's): at once when it has come, else the run
 * parks; the output is `{until}`. A wait past the longest fails for good.
 */
export async function waitUntil(ctx: Pick<StepContext, 'key' | 'clock'>, effects: Effects, kind: WaitKind, until: Date): Promise<StepResult> {
  const now = ctx.clock();
  if (until.getTime() - now > MAX_WAIT_MS) throw permanentFailure(`${until.toISOString()} is further than the longest wait, ${MAX_WAIT_SECONDS / 86_400} days`);
  const state: TimeWaitState = { until: until.toISOString() };
  if (until.getTime() <= now) return { output: state };
  const answer = await effects.wait({ key: ctx.key, kind, until });
  if (!answer.park) return { output: state };
  return { output: null, park: { resumeAt: until, state } };
}

/** A delay or wait_until resumed: done once its instant has come; woken early (it should not be), it parks again. */
export function resumeTimeWait(ctx: Pick<StepContext, 'clock'>, state: unknown): StepResult {
  const until = typeof (state as TimeWaitState | null)?.until === 'string' ? Date.parse((state as TimeWaitState).until) : NaN;
  if (Number.isNaN(until)) throw permanentFailure('The wait was resumed without the instant it waits until');
  const s: TimeWaitState = { until: new Date(until).toISOString() };
  if (until > ctx.clock()) return { output: null, park: { resumeAt: new Date(until), state: s } };
  return { output: s };
}
