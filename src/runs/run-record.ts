/**
 * The size bounds of a run record. The worker stores each step's output up to a cap and
 * the steps together up to another; beyond them a step keeps a preview of its output and
 * says so (`output_truncated`, `output_bytes`). An output over its cap is cut as the step
 * ends (keptOutput): the later steps see its preview too, so a run holds at most the cap
 * per step; the steps' total cap cuts only the record. Errors are cut with a marker.
 *
 * An answer applies the same cuts again with the largest caps the settings allow, so a
 * record stored before the caps (or a payload as large as the webhook limit) cannot make
 * a page of runs unbounded: see docs/workflows.md, "Sizes".
 */
import type { StepRecord } from '../db/tables.ts';
import { isStorableText } from '../json.ts';

export interface RecordCaps {
  /** One step's output, as JSON. */
  readonly outputBytes: number;
  /** One error text, as JSON. */
  readonly errorBytes: number;
  /** The whole `steps` array, as JSON. */
  readonly stepsBytes: number;
}

/** A cut output keeps a preview of at most this many bytes (as JSON). */
export const PREVIEW_BYTES = 512;

/**
 * What an answer shows at most. The step caps are the largest the settings accept, so they
 * only cut records stored before the caps existed; a payload is stored whole (every attempt
 * and a replay run it) and shown whole up to PAYLOAD_SHOWN_BYTES.
 */
export const ANSWER_CAPS: RecordCaps = { outputBytes: 262_144, errorBytes: 16_384, stepsBytes: 262_144 };
export const PAYLOAD_SHOWN_BYTES = 65_536;

/**
 * The most one run takes in an answer: its payload, steps and error at their answer caps,
 * and room for the other attributes (a delivery id of up to 1,024 characters, ids, times).
 * A page of runs takes at most its length times this (344 KiB): the default page of 50
 * at most 16.8 MiB, the largest (250) 84 MiB.
 */
export const RUN_ANSWER_MAX_BYTES = PAYLOAD_SHOWN_BYTES + ANSWER_CAPS.stepsBytes + ANSWER_CAPS.errorBytes + 8192;

export function jsonBytes(value: unknown): number {
  return Buffer.byteLength(JSON.stringify(value) ?? 'null');
}

/**
 * The longest start of `text` that, with `marker` after it, takes at most `maxBytes` as
 * JSON; never ending inside a surrogate pair (a lone half is text the database refuses).
 */
export function cutText(text: string, maxBytes: number, marker = ''): string {
  if (jsonBytes(text) <= maxBytes) return text;
  // Every character takes at least a byte: no start longer than maxBytes can fit.
  let lo = 0;
  let hi = Math.min(text.length, maxBytes);
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (jsonBytes(text.slice(0, mid) + marker) <= maxBytes) lo = mid;
    else hi = mid - 1;
  }
  const end = lo > 0 && /[\ud800-\udbff]/.test(text[lo - 1]!) ? lo - 1 : lo;
  return text.slice(0, end) + marker;
}

/** A step output's preview: the start of its JSON, as a string of at most PREVIEW_BYTES as JSON. */
const previewOf = (output: unknown) => cutText(JSON.stringify(output) ?? 'null', PREVIEW_BYTES);

/**
 * What a run keeps of a step's output, for its record and for the later steps alike: the
 * output itself up to `maxBytes` as JSON (RUN_STEP_OUTPUT_MAX_BYTES), beyond it its preview,
 * so that a run holds at most that much per step, whatever its steps give.
 */
export function keptOutput(output: unknown, maxBytes: number): { output: unknown; output_truncated?: true; output_bytes?: number } {
  // Most outputs are small: a number, a flag, an object of a few fields.
  if (output === undefined || output === null || typeof output === 'number' || typeof output === 'boolean') return { output: output ?? null };
  if (typeof output === 'string' && output.length * 3 + 2 <= maxBytes) return { output };
  const bytes = jsonBytes(output);
  if (bytes <= maxBytes) return { output };
  return { output: previewOf(output), output_truncated: true, output_bytes: bytes };
}

const cutError = (text: string, maxBytes: number) => cutText(text, maxBytes, ` ... [cut: ${Buffer.byteLength(text)} bytes]`);

/** Every record of a tree of records (a switch's `steps`, a for_each's `item_records`), each before the records it holds. */
function* allRecords(steps: readonly StepRecord[]): Generator<StepRecord> {
  for (const s of steps) {
    yield s;
    if (Array.isArray(s.steps)) yield* allRecords(s.steps);
    for (const it of s.item_records ?? []) if (Array.isArray(it.steps)) yield* allRecords(it.steps);
  }
}

/** The bytes of a record's output members, as JSON: what cutting its output changes. */
const outputMembers = (s: StepRecord) => jsonBytes({ output: s.output, output_truncated: s.output_truncated, output_bytes: s.output_bytes });

/**
 * Step records within the caps: first each output and error, then the largest outputs until
 * the steps fit. Nested records (a switch's branch, a for_each's items) count and are cut as
 * the top-level ones: an output anywhere in the tree may become its preview. When even the
 * previews do not fit, the nested records are dropped, the largest holder first, each saying
 * so with `records_cut: true` (its own status, output, `branch` and `items` stay).
 */
export function capSteps(steps: readonly StepRecord[], caps: RecordCaps): StepRecord[] {
  const errorFits = (s: StepRecord) => typeof s.error !== 'string' || jsonBytes(s.error) <= caps.errorBytes;
  const nests = (s: StepRecord) => s.steps !== undefined || s.item_records !== undefined;
  // The usual record: small enough that no single output can be over its cap either.
  if (jsonBytes(steps) <= Math.min(caps.outputBytes, caps.stepsBytes) && steps.every(errorFits)) return [...steps];
  // Cut in place on a copy: a nested record is reached through its holders.
  const out: StepRecord[] = steps.some(nests) ? structuredClone(steps as StepRecord[]) : steps.map((s) => ({ ...s }));
  const all = [...allRecords(out)];
  for (const s of all) if (!errorFits(s)) s.error = cutError(s.error!, caps.errorBytes);
  const sizes = all.map((s) => (s.output_truncated ? 0 : jsonBytes(s.output)));
  const truncate = (i: number): number => {
    const s = all[i]!;
    const before = outputMembers(s);
    s.output = previewOf(s.output);
    s.output_truncated = true;
    s.output_bytes = sizes[i]!;
    sizes[i] = 0;
    return outputMembers(s) - before;
  };
  for (let i = 0; i < all.length; i++) if (sizes[i]! > caps.outputBytes) truncate(i);
  let total = jsonBytes(out);
  while (total > caps.stepsBytes) {
    let largest = -1;
    for (let i = 0; i < all.length; i++) if (sizes[i]! > PREVIEW_BYTES && (largest < 0 || sizes[i]! > sizes[largest]!)) largest = i;
    if (largest < 0) break;
    total += truncate(largest);
  }
  // Only previews left and still too large (many nested steps): the nested records go, the largest first.
  while (total > caps.stepsBytes) {
    const holders = out.filter((s) => nests(s) && !s.records_cut);
    if (holders.length === 0) break;
    const largest = holders.reduce((a, b) => (jsonBytes(b) > jsonBytes(a) ? b : a));
    const before = jsonBytes(largest);
    if (largest.steps !== undefined) largest.steps = [];
    if (largest.item_records !== undefined) largest.item_records = largest.item_records.map((it) => ({ ...it, steps: [] }));
    largest.records_cut = true;
    total += jsonBytes(largest) - before;
  }
  return out;
}

/**
 * An error text the database can store: an error may quote what a provider or a driver
 * said, and a NUL or a lone surrogate there would make the whole outcome unrecordable.
 */
const storableError = (text: string) => (isStorableText(text) ? text : text.toWellFormed().replaceAll('\0', '\ufffd'));

/** An outcome or a row with its steps and error within the caps, the errors storable. */
export function capRecord<T extends { steps: StepRecord[]; error: string | null }>(record: T, caps: RecordCaps): T {
  const steps = record.steps.map((s) => (typeof s.error === 'string' && !isStorableText(s.error) ? { ...s, error: storableError(s.error) } : s));
  return { ...record, steps: capSteps(steps, caps), error: record.error === null ? null : cutError(storableError(record.error), caps.errorBytes) };
}

/** A run as answers show it: its record within ANSWER_CAPS, and a large payload as a preview. */
export function presentRun(row: { steps?: unknown; error?: string | null; payload?: unknown; traceparent?: string | null }): Record<string, unknown> {
  const { steps, error } = capRecord({ steps: Array.isArray(row.steps) ? row.steps : [], error: row.error ?? null }, ANSWER_CAPS);
  const payloadJson = JSON.stringify(row.payload) ?? 'null';
  const payloadBytes = Buffer.byteLength(payloadJson);
  const shown = payloadBytes <= PAYLOAD_SHOWN_BYTES;
  return {
    steps,
    error,
    payload: shown ? row.payload : cutText(payloadJson, PREVIEW_BYTES),
    payload_truncated: !shown,
    payload_bytes: payloadBytes,
    trace_id: traceIdOf(row.traceparent),
  };
}

/** The trace id of a stored `traceparent` (`00-<trace id>-<span id>-<flags>`), or null. */
export const traceIdOf = (traceparent: string | null | undefined): string | null => (typeof traceparent === 'string' ? traceparent.slice(3, 35) : null);
