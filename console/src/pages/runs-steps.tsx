/**
 * A run's steps in order. A step's input is not stored: what it read is rebuilt here from the
 * run's payload and the outputs of the steps before it (the expression context of
 * docs/workflows.md), and labelled as such; a preview output or payload makes it a preview too.
 */
import { Badge, Duration, Json, Time } from '../ui/index.tsx';
import { ErrorText, formatBytes, type Run, type StepRecord } from './runs-model.tsx';

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

export function RunSteps(props: { run: Run; types: Map<string, string> }) {
  const a = props.run.attributes;
  if (a.steps.length === 0) return <p class="muted">No step has run yet.</p>;
  const earlier: Record<string, unknown> = {};
  let previews = a.payload_truncated === true;
  return (
    <ol class="steps" data-testid="run-steps">
      {a.steps.map((s, i) => {
        const ran = s.status !== 'skipped';
        const context = {
          payload: a.payload,
          steps: { ...earlier },
          run: { id: props.run.id, attempt: s.attempt ?? a.attempt },
          trigger: { key: a.trigger_key },
        };
        const contextHasPreview = previews;
        if (ran) earlier[s.key] = s.output;
        if (s.output_truncated) previews = true;
        const type = props.types.get(s.key);
        return (
          <li class={`step ${s.status}`} aria-labelledby={`step-${i}`}>
            <div class="step-head">
              <h3 id={`step-${i}`}>
                {i + 1}. {s.key}
              </h3>
              {type && <span class="muted small">{type.replaceAll('_', ' ')}</span>}
              <Badge value={s.status} />
              {s.attempt !== undefined && (
                <span class="muted small" data-testid="step-attempts">
                  {attemptsText(s.attempt, s.attempts ?? 1, a.attempt)}
                </span>
              )}
              <span class="muted small step-time">
                <Time value={s.started_at} /> → <Time value={s.finished_at} /> · <Duration from={s.started_at} to={s.finished_at} />
              </span>
            </div>
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
          </li>
        );
      })}
    </ol>
  );
}

/** Which attempt gave the result shown, how many ran the step, and whether a later attempt resumed after it. */
export function attemptsText(attempt: number, attempts: number, runAttempt: number): string {
  const tries = attempts > 1 ? ` (${attempts} attempts)` : '';
  const kept = attempt < runAttempt ? ', kept by later attempts' : '';
  return `attempt ${attempt}${tries}${kept}`;
}
