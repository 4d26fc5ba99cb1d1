/**
 * for_each: its steps run once per item of the `items` expression's value (an array; one
 * value is one item, nothing is no item), at most `concurrency` items at once. The steps
 * of an item see `item` and `index` and, within the item, `steps.<key>` of the item's
 * earlier steps. Its output is an array, per item the output of the item's last step
 * (null for an item a false condition stopped).
 *
 * The items are evaluated once and kept with the checkpoint (past the output cap, their
 * count and hash): a later attempt runs on the same items, or fails for good if a list too
 * large to keep came out other. Each finished item is kept with the run's checkpoint: a later attempt runs only the
 * items that did not finish, and inside an unfinished item resumes after its succeeded
 * steps. When an item fails, no further item starts; the ones running finish, and the step
 * fails with the first failure.
 */
import type { ForEachConfig, ItemRecord, StepRecord } from '../db/tables.ts';
import { createHash } from 'node:crypto';
import { permanentFailure, WorkFailure } from '../errors.ts';
import { capSteps, cutText, jsonBytes, PREVIEW_BYTES } from '../runs/run-record.ts';
import { checked, ConfigIssue, expression, onlyMembers } from './config.ts';
import { stepList } from './switch.ts';
import { evaluateOne, type StepType } from './step.ts';

/** Items one for_each may have (write_fact's own for_each stores up to MAX_FOR_EACH_ITEMS facts in one step). */
export const MAX_ITEMS = 1000;
export const DEFAULT_CONCURRENCY = 1;
export const MAX_CONCURRENCY = 20;

/** An item's result as the checkpoint keeps it: its output, or once the outputs passed the cap its size and the start of its JSON. */
interface Done {
  status: 'succeeded' | 'stopped';
  output?: unknown;
  bytes?: number;
  head?: string;
  reason?: string;
  steps?: StepRecord[];
}

/**
 * What a for_each keeps with the checkpoint (docs/workflows.md, "for_each"): the items it
 * began with (or, past the output cap, their count and hash) and each finished item's
 * result, by index. Bounded: the items and the kept outputs each at most the output cap
 * (RUN_STEP_OUTPUT_MAX_BYTES); past it (`cut`) an item keeps its size and at most the
 * start of its JSON its preview can need; the records of the first ITEM_RECORDS_SHOWN
 * items are cut to the output cap each.
 */
interface Progress {
  items?: unknown[];
  items_hash?: { count: number; sha256: string };
  done: Record<number, Done>;
  cut?: true;
}

const itemsHash = (items: unknown[]) => ({ count: items.length, sha256: createHash('sha256').update(JSON.stringify(items)).digest('hex') });

/**
 * How much of item `index`'s JSON the output's preview can need: the array's JSON holds `[`
 * and each earlier item and its comma before it (an item not yet known at least `x,`; a
 * known one at least a character per 3 bytes of its UTF-8). So only the first items keep a
 * head, the fewer the larger they are.
 */
function headChars(done: Record<number, Done>, index: number): number {
  let at = 1;
  for (let j = 0; j < index && at < PREVIEW_BYTES; j++) at += Math.max(1, Math.ceil((done[j]?.bytes ?? 1) / 3)) + 1;
  return Math.max(0, PREVIEW_BYTES - at);
}

/** The collected output as its preview, from the kept heads (or outputs) in order, and its full size as JSON. */
function cutOutput(done: Record<number, Done>, count: number): { output: string; bytes: number } {
  let bytes = 2 + Math.max(0, count - 1);
  let text = '[';
  for (let i = 0; i < count; i++) {
    const d = done[i]!;
    bytes += d.bytes ?? jsonBytes(d.output ?? null);
    if (text.length <= PREVIEW_BYTES) text += (i > 0 ? ',' : '') + (d.head ?? JSON.stringify(d.output ?? null));
  }
  return { output: cutText(text, PREVIEW_BYTES), bytes };
}

function readForEach(config: Record<string, unknown>): ForEachConfig {
  onlyMembers(config, ['items', 'concurrency', 'steps'], '', "a for_each step's config");
  const items = expression(config, 'items', '', true)!;
  const c = config.concurrency ?? DEFAULT_CONCURRENCY;
  if (typeof c !== 'number' || !Number.isInteger(c) || c < 1 || c > MAX_CONCURRENCY)
    throw new ConfigIssue('/concurrency', `concurrency must be an integer from 1 to ${MAX_CONCURRENCY}`);
  const steps = stepList(config, 'steps', '', true);
  if (steps.length === 0) throw new ConfigIssue('/steps', 'steps must hold at least one step');
  return { items, concurrency: c, steps };
}

export const forEach: StepType<ForEachConfig> = {
  type: 'for_each',
  checkpoint: 'with-next',
  validate: (config) => checked(() => readForEach(config)),
  describe: (c) => ({ expressions: [['items', c.items]], lists: [{ pointer: 'steps', steps: c.steps, kind: 'item' }] }),
  run: async (c, ctx) => {
    const nested = ctx.nested;
    if (!nested) throw new Error('for_each runs only in the executor');
    const record = ctx.record ?? {};
    const cap = ctx.outputMaxBytes ?? Number.POSITIVE_INFINITY;
    const prior = ctx.progress as Progress | undefined;
    const progress: Progress = { ...prior, done: { ...prior?.done } };
    // The items are evaluated once: a later attempt runs on the same list, so item n is the same item at every attempt.
    let items: unknown[];
    if (prior?.items !== undefined) items = prior.items;
    else {
      const value = await evaluateOne(ctx, c.items);
      items = value === undefined || value === null ? [] : Array.isArray(value) ? value : [value];
      if (items.length > MAX_ITEMS) throw permanentFailure(`items gave ${items.length} items; a for_each runs at most ${MAX_ITEMS}`);
      const hash = itemsHash(items);
      if (prior?.items_hash !== undefined) {
        if (prior.items_hash.sha256 !== hash.sha256)
          throw permanentFailure(
            `items gave other items than when the loop began (${prior.items_hash.count} then, ${items.length} now); a for_each list too large to keep with the run must give the same items at every attempt`,
          );
      } else {
        if (jsonBytes(items) <= cap) progress.items = items;
        else progress.items_hash = hash;
        // Recorded before any item runs: an item's facts and calls are keyed by its index, which must name the same item at every attempt.
        if (ctx.saveProgress && !(await ctx.saveProgress(progress))) throw new WorkFailure('The run was taken over by another attempt', { transient: true });
        ctx.noteProgress?.(progress);
      }
    }
    // The kept outputs' size as the collected array's JSON would take it (a comma each, brackets), kept as a running total.
    let keptBytes = 1 + Object.values(progress.done).reduce((n, d) => n + 1 + (d.bytes ?? jsonBytes(d.output ?? null)), 0);
    /** Past the cap the output will be its preview whatever the other items give: each item keeps its size and the start of its JSON only. */
    const shrink = (index: number, d: Done): Done => {
      if (d.bytes !== undefined) return d;
      const json = JSON.stringify(d.output ?? null);
      const { output: _, ...rest } = d;
      const head = headChars(progress.done, index);
      return { ...rest, bytes: Buffer.byteLength(json), ...(head > 0 ? { head: json.slice(0, head) } : {}) };
    };
    const keep = (index: number, d: Done) => {
      progress.done[index] = progress.cut ? shrink(index, d) : d;
      keptBytes += 1 + (d.bytes ?? jsonBytes(d.output ?? null));
      if (!progress.cut && keptBytes > cap) {
        progress.cut = true;
        for (const [i, x] of Object.entries(progress.done)) progress.done[Number(i)] = shrink(Number(i), x);
      }
    };
    const records: ItemRecord[] = [];
    const counts = { count: items.length, succeeded: 0, stopped: 0, failed: 0, not_run: 0 };
    record.items = counts;
    record.item_records = records;
    const outputs: unknown[] = Array.from({ length: items.length }, () => null);
    const show = (r: ItemRecord) => {
      if (r.index < nested.itemRecordsShown || (r.status === 'failed' && !records.some((x) => x.status === 'failed'))) records.push(r);
    };
    let next = 0;
    let failure: unknown;
    let failed = false;
    const runItem = async (index: number) => {
      const kept = progress.done[index];
      if (kept !== undefined) {
        outputs[index] = kept.output ?? null;
        counts[kept.status]++;
        show({ index, status: kept.status, ...(kept.reason === undefined ? {} : { reason: kept.reason }), steps: kept.steps ?? [] });
        return;
      }
      const into: StepRecord[] = [];
      const span = ctx.span?.child('workflow.item', 'internal', { 'tributary.step.key': ctx.key, 'tributary.item.index': index });
      const prefix = `${ctx.key}[${index}].`;
      try {
        const r = await nested.list(c.steps, { into, input: { ...ctx.input, steps: { ...ctx.input.steps }, item: items[index], index }, prefix, span });
        const status = r.stopped === undefined ? 'succeeded' : 'stopped';
        outputs[index] = r.stopped === undefined ? r.output : null;
        counts[status]++;
        keep(index, {
          status,
          output: outputs[index],
          ...(r.stopped === undefined ? {} : { reason: r.stopped }),
          ...(index < nested.itemRecordsShown ? { steps: capSteps(into, { outputBytes: cap, errorBytes: cap, stepsBytes: cap }) } : {}),
        });
        // The item's result is kept by the for_each from here: its steps' records need not be.
        nested.forget(prefix);
        ctx.noteProgress?.(progress);
        show({ index, status, ...(r.stopped === undefined ? {} : { reason: r.stopped }), steps: into });
        span?.set({ 'tributary.item.outcome': status });
      } catch (err) {
        counts.failed++;
        show({ index, status: 'failed', steps: into });
        span?.set({ 'tributary.item.outcome': 'failed' });
        throw err;
      } finally {
        span?.end();
      }
    };
    const lane = async () => {
      while (!failed && next < items.length) {
        const index = next++;
        try {
          await runItem(index);
        } catch (err) {
          if (!failed) failure = err;
          failed = true;
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(c.concurrency, items.length) }, lane));
    if (failed) {
      counts.not_run = items.length - counts.succeeded - counts.stopped - counts.failed;
      records.sort((a, b) => a.index - b.index);
      throw failure;
    }
    records.sort((a, b) => a.index - b.index);
    if (progress.cut) {
      const { output, bytes } = cutOutput(progress.done, items.length);
      return { output, outputCut: { bytes } };
    }
    return { output: outputs };
  },
};
