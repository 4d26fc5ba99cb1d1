/**
 * for_each: its steps run once per item of the `items` expression's value (an array; one
 * value is one item, nothing is no item), at most `concurrency` items at once. The steps
 * of an item see `item` and `index` and, within the item, `steps.<key>` of the item's
 * earlier steps. Its output is an array, per item the output of the item's last step
 * (null for an item a false condition stopped).
 *
 * Each finished item is kept with the run's checkpoint: a later attempt runs only the
 * items that did not finish, and inside an unfinished item resumes after its succeeded
 * steps. When an item fails, no further item starts; the ones running finish, and the step
 * fails with the first failure.
 */
import type { ForEachConfig, ItemRecord, StepRecord } from '../db/tables.ts';
import { permanentFailure } from '../errors.ts';
import { checked, ConfigIssue, expression, onlyMembers } from './config.ts';
import { stepList } from './switch.ts';
import { evaluateOne, type StepType } from './step.ts';

/** Items one for_each may have (write_fact's own for_each stores up to MAX_FOR_EACH_ITEMS facts in one step). */
export const MAX_ITEMS = 1000;
export const DEFAULT_CONCURRENCY = 1;
export const MAX_CONCURRENCY = 20;

/** What a for_each keeps with the checkpoint: each finished item's result, by index. */
interface Progress {
  done: Record<number, { status: 'succeeded' | 'stopped'; output: unknown; reason?: string; steps?: StepRecord[] }>;
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
    const value = await evaluateOne(ctx, c.items);
    const items = value === undefined || value === null ? [] : Array.isArray(value) ? value : [value];
    if (items.length > MAX_ITEMS) throw permanentFailure(`items gave ${items.length} items; a for_each runs at most ${MAX_ITEMS}`);
    const progress: Progress = { done: { ...(ctx.progress as Progress | undefined)?.done } };
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
        outputs[index] = kept.output;
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
        progress.done[index] = {
          status,
          output: outputs[index],
          ...(r.stopped === undefined ? {} : { reason: r.stopped }),
          ...(index < nested.itemRecordsShown ? { steps: into } : {}),
        };
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
    return { output: outputs };
  },
};
