/**
 * write_fact: facts of one data model, from a mapping (field: expression) or one data
 * expression, one per item with for_each. All or nothing: one bad item fails the step
 * before any of its facts is stored. Each item is validated once, here; the effects store
 * what was validated (facts/write.ts storeValidFacts).
 *
 * At most once per (delivery, version, step, item) however often it runs, a retry or a
 * replay on the same version: each fact's source key is made of those four (see
 * sourceKey), and the fact table keeps one fact per source key.
 */
import { createHash } from 'node:crypto';
import type { WriteFactConfig } from '../db/tables.ts';
import { permanentFailure } from '../errors.ts';
import { validateFact, type FactInput, type ValidFact } from '../facts/validate.ts';
import { isObject } from '../json.ts';
import { SLUG_RE } from '../input.ts';
import { checked, ConfigIssue, expression, MAX_MAPPING_FIELDS, membersOf, onlyMembers } from './config.ts';
import type { FactsToStore } from './effects.ts';
import { evaluate, type StepRun, type StepType } from './step.ts';

/** Items one write_fact step may store (for_each). */
export const MAX_FOR_EACH_ITEMS = 10_000;
/** Validation problems listed in a failed step's error. */
const MAX_LISTED_PROBLEMS = 5;

/**
 * A fact's source key. With the run's source identity (its delivery, its schedule tick, or
 * the original's for a replay): `d:<sha256 of the identity, base64url>:v<version>:<step>:<index>`,
 * the same for every attempt and every replay on the version, another on a newer version.
 * A run made before source identities (none stored) keeps its run-id keys.
 */
export function sourceKey(run: Pick<StepRun, 'id' | 'workflow_version' | 'source_identity'>, stepKey: string, index: number): string {
  if (run.source_identity === null) return `run:${run.id}:${stepKey}:${index}`;
  const digest = createHash('sha256').update(run.source_identity).digest('base64url');
  return `d:${digest}:v${run.workflow_version}:${stepKey}:${index}`;
}

/** The model's required fields a mapping names whose expression gave nothing: the step's error, or undefined. */
function missingRequired(model: StepRun['models'][number], mapping: Record<string, string>, rows: unknown[][], forEach: boolean): string | undefined {
  const required = new Set(model.fields.filter((f) => f.is_required).map((f) => f.name));
  const fields = Object.keys(mapping)
    .map((name, i) => ({ name, i }))
    .filter((f) => required.has(f.name));
  if (fields.length === 0) return undefined;
  const problems: string[] = [];
  let count = 0;
  rows.forEach((row, index) => {
    for (const f of fields) {
      if (row[f.i] !== undefined) continue;
      count++;
      if (problems.length < MAX_LISTED_PROBLEMS)
        problems.push(
          `mapping.${f.name}${forEach ? ` (item ${index})` : ''}: the expression ${JSON.stringify(mapping[f.name])} gave nothing, and the data model ${model.slug} requires ${f.name}`,
        );
    }
  });
  if (count === 0) return undefined;
  return `${problems.join('; ')}${count > problems.length ? `; and ${count - problems.length} more` : ''}`;
}

function readWriteFact(config: Record<string, unknown>): WriteFactConfig {
  onlyMembers(config, ['data_model_slug', 'mapping', 'data', 'observed_at', 'for_each'], '', "a write_fact step's config");
  const slug = config.data_model_slug;
  if (typeof slug !== 'string' || !SLUG_RE.test(slug)) throw new ConfigIssue('/data_model_slug', 'data_model_slug must be the slug of a data model');
  const out: WriteFactConfig = { data_model_slug: slug };
  const hasMapping = config.mapping !== undefined && config.mapping !== null;
  const hasData = config.data !== undefined && config.data !== null;
  if (hasMapping === hasData)
    throw new ConfigIssue('', 'a write_fact step needs exactly one of mapping (an object of field: expression) and data (an expression)');
  if (hasMapping) {
    if (!isObject(config.mapping)) throw new ConfigIssue('/mapping', 'mapping must be an object of field: expression');
    const entries = Object.entries(config.mapping);
    if (entries.length === 0) throw new ConfigIssue('/mapping', 'mapping must name at least one field');
    if (entries.length > MAX_MAPPING_FIELDS) throw new ConfigIssue('/mapping', `mapping may name at most ${MAX_MAPPING_FIELDS} fields`);
    const mapping: Record<string, string> = {};
    for (const [field] of entries) mapping[field] = expression(config.mapping, field, '/mapping', true)!;
    out.mapping = mapping;
  } else {
    out.data = expression(config, 'data', '', true)!;
  }
  const observedAt = expression(config, 'observed_at', '', false);
  if (observedAt !== null) out.observed_at = observedAt;
  const forEach = expression(config, 'for_each', '', false);
  if (forEach !== null) out.for_each = forEach;
  return out;
}

export const writeFact: StepType<WriteFactConfig> = {
  type: 'write_fact',
  checkpoint: 'with-next',
  validate: (config) => checked(() => readWriteFact(config)),
  describe: (c) => {
    const expressions: Array<[string, string]> = [
      ...(c.for_each === undefined ? [] : [['for_each', c.for_each] as [string, string]]),
      ...membersOf('mapping', c.mapping),
    ];
    if (c.data !== undefined) expressions.push(['data', c.data]);
    if (c.observed_at !== undefined) expressions.push(['observed_at', c.observed_at]);
    return { expressions, dataModel: c.data_model_slug };
  },
  run: async (c, ctx, effects) => {
    const { run } = ctx;
    // An item's step stores under its instance (`loop[2].store`): each item its own facts, still once each.
    const key = ctx.instance ?? ctx.key;
    const model = run.models.find((m) => m.slug === c.data_model_slug);
    if (!model) throw permanentFailure(`The data model ${JSON.stringify(c.data_model_slug)} does not exist in this workspace`);
    const fields = c.mapping ? Object.keys(c.mapping) : undefined;
    const expressions = c.mapping ? Object.values(c.mapping) : [c.data!];
    if (c.observed_at !== undefined) expressions.push(c.observed_at);
    const rows = await evaluate(ctx, { input: ctx.input, expressions, forEach: c.for_each, maxItems: MAX_FOR_EACH_ITEMS });
    // Said before validation, which would only say "is required": which expression gave nothing.
    const missing = c.mapping ? missingRequired(model, c.mapping, rows, c.for_each !== undefined) : undefined;
    const defaultObservedAt = new Date(run.inserted_at).toISOString();
    const inputs: FactInput[] = rows.map((row, index) => {
      let data: unknown = row[0];
      if (fields) {
        const obj: Record<string, unknown> = {};
        fields.forEach((field, i) => {
          if (row[i] !== undefined) obj[field] = row[i];
        });
        data = obj;
      }
      const observedAt = c.observed_at === undefined ? defaultObservedAt : row[expressions.length - 1];
      return { observed_at: observedAt ?? null, data: data ?? null, source_key: sourceKey(run, key, index) };
    });
    const items: FactsToStore['items'] = [];
    const facts: ValidFact[] = [];
    const problems: FactsToStore['problems'] = [];
    const listed: string[] = [];
    inputs.forEach((item, index) => {
      const v = validateFact(model, item);
      if (v.ok) {
        facts.push(v.fact);
        items.push({ observed_at: v.fact.observedAt, data: v.fact.data, entity_id: v.fact.entityId });
        return;
      }
      items.push({ observed_at: item.observed_at, data: item.data });
      for (const e of v.errors) {
        problems.push({ ...(c.for_each === undefined ? {} : { item: index }), pointer: e.pointer, detail: e.detail });
        if (listed.length < MAX_LISTED_PROBLEMS) listed.push(`${c.for_each === undefined ? 'the fact' : `item ${index}`}: ${e.pointer.slice(1)} ${e.detail}`);
      }
    });
    const refusal =
      missing ??
      (problems.length > 0
        ? `The fact does not fit the data model ${model.slug}: ${listed.join('; ')}${problems.length > listed.length ? `; and ${problems.length - listed.length} more` : ''}`
        : undefined);
    const stored = await effects.storeFacts({ key, run, model, items, facts, problems, refusal });
    return { output: { data_model_slug: model.slug, items: inputs.length, ...stored }, factsWritten: stored.written };
  },
};
