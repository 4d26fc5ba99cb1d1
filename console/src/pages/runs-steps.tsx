/**
 * A run's steps in order. A step's input is not stored: what it read is rebuilt here from the
 * run's payload and the outputs of the steps before it (the expression context of
 * docs/workflows.md), and labelled as such; a preview output or payload makes it a preview too.
 * Steps that hold steps show their records nested (docs/workflows.md, "Records of nested
 * steps"): a switch the branch that ran and its steps, a for_each how its items ended and the
 * items it keeps; a parked step what it waits for; the on_failure steps follow, apart.
 */
import { Badge, Duration, Json, Time } from '../ui/index.tsx';
import { flowRows, stepNote, type FlowStep } from './workflow-flow-rows.ts';
import { ErrorText, formatBytes, type ItemRecord, type Run, type StepRecord } from './runs-model.tsx';

/** Every step of a version by key, nested and on_failure ones too: keys are unique across the workflow. */
export function stepDefs(...lists: Array<FlowStep[] | null | undefined>): Map<string, FlowStep> {
  const defs = new Map<string, FlowStep>();
  for (const list of lists) for (const r of flowRows(list ?? [])) if (r.kind === 'step') defs.set(r.step.key, r.step);
  return defs;
}

/** The innermost waiting record: the wait itself, under the switch that holds it. */
export function parkedRecord(records: StepRecord[]): StepRecord | undefined {
  const waiting = records.find((s) => s.status === 'waiting');
  if (!waiting) return undefined;
  return parkedRecord(waiting.steps ?? []) ?? waiting;
}

/** "failure" as on_failure steps saw it: the run's error names the innermost failed step. */
function failureOf(error: string | null): { step: string; error: string } | undefined {
  const m = error ? /^Step (\S+) failed: ([\s\S]*)$/.exec(error) : null;
  return m ? { step: m[1]!, error: m[2]! } : undefined;
}

function Output(props: { step: StepRecord }) {
  const s = props.step;
  if (s.output_truncated) {
    return (
      <>
        <p class="muted small">
          A preview: the first 512 bytes of an output of {formatBytes(s.output_bytes)} as JSON. The next steps read it whole; only the record keeps a preview.
        </p>
        <pre class="json" tabIndex={0} aria-label={`Output preview of ${s.key}`}>
          {String(s.output)}
        </pre>
      </>
    );
  }
  return <Json value={s.output ?? null} label={`Output of ${s.key}`} />;
}

interface Shown {
  defs: Map<string, FlowStep>;
  runAttempt: number;
  resumeAt: string | null | undefined;
}

function typeOf(shown: Shown, key: string): string | undefined {
  return shown.defs.get(key)?.type.replaceAll('_', ' ');
}

/** What every record shows in its head: key, type, status, attempts, times. */
function StepHead(props: { s: StepRecord; title: string; id: string; level: 3 | 4; shown: Shown }) {
  const { s, shown } = props;
  const type = typeOf(shown, s.key);
  const H = props.level === 3 ? 'h3' : 'h4';
  return (
    <div class="step-head">
      <H id={props.id}>{props.title}</H>
      {type && <span class="muted small">{type}</span>}
      {s.on_failure && <span class="badge bad">on failure</span>}
      <Badge value={s.status} />
      {s.attempt !== undefined && s.status !== 'waiting' && (
        <span class="muted small" data-testid="step-attempts">
          {attemptsText(s.attempt, s.attempts ?? 1, shown.runAttempt)}
        </span>
      )}
      <span class="muted small step-time">
        <Time value={s.started_at} /> → <Time value={s.finished_at} /> · <Duration from={s.started_at} to={s.finished_at} />
      </span>
    </div>
  );
}

/** A record's reason, error, condition value and wait: what it says besides its output. */
function StepNotes(props: { s: StepRecord; shown: Shown }) {
  const { s, shown } = props;
  const def = shown.defs.get(s.key);
  const waits = s.status === 'waiting' && !(s.steps ?? []).some((c) => c.status === 'waiting');
  return (
    <>
      {s.reason && (
        <p>
          <strong>Skipped:</strong> {s.reason}
        </p>
      )}
      <ErrorText text={s.error} />
      {s.value !== undefined && (
        <p>
          <strong>Condition value:</strong> <code>{JSON.stringify(s.value)}</code>
        </p>
      )}
      {waits && (
        <p data-testid="step-waits">
          <strong>Waiting:</strong> {def ? (stepNote(def) ?? def.type.replaceAll('_', ' ')) : 'a wait'}
          {shown.resumeAt && (
            <>
              ; resumes at <Time value={shown.resumeAt} /> at the latest
            </>
          )}
          .
        </p>
      )}
    </>
  );
}

function branchText(s: StepRecord, def: FlowStep | undefined): string {
  if (s.branch === 'default') return 'default';
  const cases = def?.config?.cases;
  const when = Array.isArray(cases) ? (cases[s.branch as number] as { when?: unknown } | undefined)?.when : undefined;
  return `case ${(s.branch as number) + 1}${typeof when === 'string' ? `: when ${when}` : ''}`;
}

/** A switch's branch and a for_each's items, under the record of their step. */
function Nested(props: { s: StepRecord; shown: Shown; path: string }) {
  const { s, shown, path } = props;
  const def = shown.defs.get(s.key);
  const items = s.items;
  const kept = s.item_records ?? [];
  return (
    <>
      {s.branch !== undefined && (
        <p data-testid="step-branch">
          <strong>Branch:</strong> <code class="wrap">{branchText(s, def)}</code>
        </p>
      )}
      {s.steps && s.steps.length > 0 && <NestedList records={s.steps} label={`Steps of ${s.key}'s branch`} shown={shown} path={`${path}-b`} />}
      {items && (
        <p data-testid="step-items">
          <strong>Items:</strong> {items.count}: {items.succeeded} succeeded, {items.stopped} stopped, {items.failed} failed, {items.not_run} not run
          {kept.length < items.count ? `; the records of ${kept.length} are kept (the first 10, and a failed one), the others are counted` : ''}.
        </p>
      )}
      {kept.length > 0 && (
        <ol class="steps nested items" aria-label={`Items of ${s.key}`}>
          {kept.map((it) => (
            <Item key={it.index} item={it} parent={s.key} shown={shown} path={`${path}-i${it.index}`} />
          ))}
        </ol>
      )}
    </>
  );
}

function Item(props: { item: ItemRecord; parent: string; shown: Shown; path: string }) {
  const it = props.item;
  const id = props.path;
  return (
    <li class={`step item ${it.status}`} aria-labelledby={id}>
      <div class="step-head">
        <h4 id={id}>
          {props.parent} item {it.index}
        </h4>
        <Badge value={it.status} />
      </div>
      {it.reason && <p>{it.reason}</p>}
      {it.steps.length > 0 && <NestedList records={it.steps} label={`Steps of ${props.parent} item ${it.index}`} shown={props.shown} path={props.path} />}
    </li>
  );
}

function NestedList(props: { records: StepRecord[]; label: string; shown: Shown; path: string }) {
  return (
    <ol class="steps nested" aria-label={props.label}>
      {props.records.map((c) => (
        <NestedStep s={c} shown={props.shown} path={`${props.path}-${c.key}`} />
      ))}
    </ol>
  );
}

/** A nested step's record: its context is not rebuilt (item, index and the branch's outputs are not in the run's record whole). */
function NestedStep(props: { s: StepRecord; shown: Shown; path: string }) {
  const { s, shown, path } = props;
  // Unique on the page: a for_each's items hold the same keys.
  const id = path;
  return (
    <li class={`step ${s.status}`} aria-labelledby={id}>
      <StepHead s={s} title={s.key} id={id} level={4} shown={shown} />
      <StepNotes s={s} shown={shown} />
      {s.status === 'succeeded' && (
        <details>
          <summary>Output</summary>
          <Output step={s} />
        </details>
      )}
      <Nested s={s} shown={shown} path={path} />
    </li>
  );
}

export function RunSteps(props: { run: Run; defs: Map<string, FlowStep> }) {
  const a = props.run.attributes;
  if (a.steps.length === 0) return <p class="muted">No step has run yet.</p>;
  const shown: Shown = { defs: props.defs, runAttempt: a.attempt, resumeAt: a.resume_at };
  const earlier: Record<string, unknown> = {};
  let previews = a.payload_truncated === true;
  const failure = failureOf(a.error);
  const item = (s: StepRecord, i: number) => {
    const ran = s.status !== 'skipped' && s.status !== 'waiting';
    const context = {
      payload: a.payload,
      steps: { ...earlier },
      run: { id: props.run.id, attempt: s.attempt ?? a.attempt },
      trigger: { key: a.trigger_key },
      ...(s.on_failure && failure ? { failure } : {}),
    };
    const contextHasPreview = previews;
    if (ran) earlier[s.key] = s.output;
    if (s.output_truncated) previews = true;
    return (
      <li class={`step ${s.status}`} aria-labelledby={`step-${i}`}>
        <StepHead s={s} title={`${i + 1}. ${s.key}`} id={`step-${i}`} level={3} shown={shown} />
        <StepNotes s={s} shown={shown} />
        {ran && (
          <div class="step-io">
            <details>
              <summary>Context it read (rebuilt: a step's input is not stored)</summary>
              <p class="muted small">
                The payload and the outputs of the steps before it{contextHasPreview ? '; parts shown are previews, the step read them whole' : ''}.
                <code>run.attempt</code> is the number of the last attempt.
              </p>
              <Json value={context} label={`Context ${s.key} read`} />
            </details>
            {s.status === 'succeeded' && (
              <div>
                <h4>Output</h4>
                <Output step={s} />
              </div>
            )}
          </div>
        )}
        <Nested s={s} shown={shown} path={`step-${i}`} />
      </li>
    );
  };
  const own = a.steps.filter((s) => !s.on_failure);
  const onFailure = a.steps.filter((s) => s.on_failure);
  return (
    <>
      <ol class="steps" data-testid="run-steps">
        {own.map((s, i) => item(s, i))}
      </ol>
      {onFailure.length > 0 && (
        <>
          <h3 id="on-failure-steps">On failure</h3>
          <p class="muted small">
            The workflow's on_failure steps: they ran once, when the run failed for good, with <code>failure</code>
            {failure ? (
              <>
                {' '}
                (step <code>{failure.step}</code>)
              </>
            ) : null}{' '}
            in their context.
          </p>
          <ol class="steps" aria-labelledby="on-failure-steps" data-testid="run-on-failure-steps">
            {onFailure.map((s, i) => item(s, own.length + i))}
          </ol>
        </>
      )}
    </>
  );
}

/** Which attempt gave the result shown, how many ran the step, and whether a later attempt resumed after it. */
export function attemptsText(attempt: number, attempts: number, runAttempt: number): string {
  const tries = attempts > 1 ? ` (${attempts} attempts)` : '';
  const kept = attempt < runAttempt ? ', kept by later attempts' : '';
  return `attempt ${attempt}${tries}${kept}`;
}
