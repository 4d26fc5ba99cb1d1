/**
 * A test run from the console: a pasted payload (checked as JSON here, before any request)
 * and its headers, a version and a call mode, sent with the SDK's testRun; the answer shows
 * each step's status, input, output, error, the facts it would write and their problems.
 * The sample starts as the workflow's last delivery (its payload, headers and id), or the
 * template when it has none. Whatever fails clears the previous result: an error never
 * stands beside an earlier success.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { useClient } from '../api.ts';
import { Badge, ErrorNotice, Field, Json } from '../ui/index.tsx';
import { VersionSelect } from './workflow-version-select.tsx';

interface TestStep {
  key: string;
  type: string;
  status: string;
  reason?: string;
  note?: string;
  input?: unknown;
  input_truncated?: boolean;
  output?: unknown;
  error?: string | null;
  value?: unknown;
  request?: unknown;
  response?: unknown;
  facts?: unknown[];
  facts_not_shown?: number;
  problems?: Array<{ item?: number; pointer: string; detail: string }>;
  problems_not_shown?: number;
}

interface TestRunAnswer {
  /** null: the editor's unsaved text was tested. */
  workflow_version: number | null;
  status: string;
  outcome: string;
  facts_would_write: number;
  error: string | null;
  steps: TestStep[];
}

const SAMPLE = '{\n  "data": {"id": "o-1", "amount": 12.5}\n}';
/** Runs looked at for the last delivery: the newest ones, some of them schedule ticks. */
const LAST_DELIVERY_RUNS = 20;

interface Sample {
  payload: string;
  headers: string;
  deliveryId: string;
  /** Where it came from, said beside the fields. */
  from: string;
}

const TEMPLATE: Sample = { payload: SAMPLE, headers: '', deliveryId: '', from: 'the template (the workflow has no delivery yet)' };

interface RunSample {
  id: string;
  attributes: {
    payload?: unknown;
    payload_truncated?: boolean;
    delivery_headers?: Record<string, string> | null;
    delivery_id?: string | null;
    inserted_at?: string;
  };
}

/** The newest run that came from a delivery (a schedule's has no headers) and whose payload an answer shows whole. */
export function lastDeliverySample(runs: RunSample[]): Sample | undefined {
  const run = runs.find((r) => r.attributes.delivery_headers != null && r.attributes.payload_truncated !== true);
  if (!run) return undefined;
  const a = run.attributes;
  return {
    payload: JSON.stringify(a.payload ?? null, null, 2),
    headers: Object.entries(a.delivery_headers ?? {})
      .map(([name, value]) => `${name}: ${value}`)
      .join('\n'),
    deliveryId: a.delivery_id ?? '',
    from: `the last delivery (run ${run.id}${a.inserted_at ? `, ${a.inserted_at}` : ''})`,
  };
}

/** `Name: value` lines as the headers object, or what is wrong with the first bad line. */
export function parseHeaderLines(text: string): { headers: Record<string, string> } | { problem: string } {
  const headers: Record<string, string> = {};
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.trim();
    if (line === '') continue;
    const colon = line.indexOf(':');
    const name = colon < 0 ? '' : line.slice(0, colon).trim();
    if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name)) return { problem: `Line ${i + 1} of the headers is not "Name: value". Nothing was sent.` };
    Object.defineProperty(headers, name, { value: line.slice(colon + 1).trim(), enumerable: true, writable: true, configurable: true });
  }
  return { headers };
}

/** What JSON.parse said, with the line and column when it gave only a position. */
function parseProblem(text: string, error: unknown): string {
  let message = (error instanceof Error ? error.message : String(error)).replace(/\.$/, '');
  const at = /at position (\d+)$/.exec(message);
  if (at) {
    const before = text.slice(0, Number(at[1]));
    message += ` (line ${before.split('\n').length}, column ${before.length - before.lastIndexOf('\n')})`;
  }
  return `The payload is not valid JSON: ${message}. Nothing was sent.`;
}

function StepResult(props: { step: TestStep; index: number }) {
  const s = props.step;
  const id = `test-step-${props.index}`;
  return (
    <article class="wf-test-step" aria-labelledby={id}>
      <h3 id={id}>
        {props.index + 1}. {s.key} <span class="muted small">({s.type.replaceAll('_', ' ')})</span> <Badge value={s.status} />
      </h3>
      {s.reason && <p class="muted">{s.reason}</p>}
      {s.note && <p class="notice info small">{s.note}</p>}
      {s.error && (
        <p class="notice error small">
          <strong>Error:</strong> {s.error}
        </p>
      )}
      {s.status !== 'skipped' && (
        <>
          <h4>Output</h4>
          <Json value={s.output ?? null} label={`Output of step ${s.key}`} />
        </>
      )}
      {s.value !== undefined && (
        <p>
          The condition's expression gave <code>{JSON.stringify(s.value)}</code>.
        </p>
      )}
      {s.request !== undefined && (
        <>
          <h4>Request it would send</h4>
          <Json value={s.request} label={`Request of step ${s.key}`} />
        </>
      )}
      {s.response !== undefined && (
        <>
          <h4>Response</h4>
          <Json value={s.response} label={`Response of step ${s.key}`} />
        </>
      )}
      {s.facts && s.facts.length > 0 && (
        <>
          <h4>
            Facts it would write ({s.facts.length}
            {s.facts_not_shown ? ` shown, ${s.facts_not_shown} more` : ''})
          </h4>
          <Json value={s.facts} label={`Facts step ${s.key} would write`} />
        </>
      )}
      {s.problems && s.problems.length > 0 && (
        <>
          <h4>Problems{s.problems_not_shown ? ` (${s.problems_not_shown} more not shown)` : ''}</h4>
          <div class="table-wrap">
            <table>
              <caption class="visually-hidden">Problems of step {s.key}</caption>
              <thead>
                <tr>
                  <th scope="col">Item</th>
                  <th scope="col">Pointer</th>
                  <th scope="col">Problem</th>
                </tr>
              </thead>
              <tbody>
                {s.problems.map((p) => (
                  <tr>
                    <td>{p.item ?? '—'}</td>
                    <td class="mono">{p.pointer}</td>
                    <td>{p.detail}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        </>
      )}
      {s.input !== undefined && s.input !== null && (
        <details>
          <summary>Input{s.input_truncated ? ' (the start of it)' : ''}</summary>
          <Json value={s.input} label={`Input of step ${s.key}`} />
        </details>
      )}
    </article>
  );
}

/**
 * `unsaved`: the editor's text and where to mark a problem of it, when the page has an editor;
 * `workflowId` null: a workflow not saved yet, whose text is all there is to test.
 */
export function TestRun(props: {
  workflowId: string | null;
  versions: number[];
  current: number;
  triggerKeys: string[];
  unsaved?: { text: () => string | undefined; markError: (error: unknown) => boolean };
}) {
  const client = useClient();
  const [payload, setPayload] = useState(SAMPLE);
  const [headers, setHeaders] = useState('');
  const [deliveryId, setDeliveryId] = useState('');
  const [sampleFrom, setSampleFrom] = useState<string | undefined>(undefined);
  // The last delivery arrives after the first render: it must not overwrite what someone typed meanwhile.
  const edited = useRef(false);
  const [version, setVersion] = useState(String(props.current));
  const [call, setCall] = useState<'none' | 'safe'>('none');
  const [trigger, setTrigger] = useState('');
  const [invalid, setInvalid] = useState<string | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);
  const [answer, setAnswer] = useState<TestRunAnswer | undefined>(undefined);
  const [ofText, setOfText] = useState(props.workflowId === null);

  useEffect(() => {
    let live = true;
    if (props.workflowId === null) return;
    const q = `filter[workflow_id]=${encodeURIComponent(props.workflowId)}&sort=-inserted_at&page[limit]=${LAST_DELIVERY_RUNS}&fields[workflow_run]=payload,payload_truncated,delivery_headers,delivery_id,inserted_at`;
    client
      .request('GET', `/workflow_runs?${q}`)
      .then((doc) => lastDeliverySample(((doc as { data?: RunSample[] }).data ?? []) as RunSample[]))
      // Runs unreadable (no runs:read scope, the network): the template is the sample.
      .catch(() => undefined)
      .then((sample = TEMPLATE) => {
        if (!live) return;
        setSampleFrom(sample.from);
        if (edited.current) return;
        setPayload(sample.payload);
        setHeaders(sample.headers);
        setDeliveryId(sample.deliveryId);
      });
    return () => {
      live = false;
    };
  }, [props.workflowId]);

  const edit = (set: (v: string) => void) => (v: string) => {
    edited.current = true;
    set(v);
  };

  const submit = async (e: Event) => {
    e.preventDefault();
    setError(undefined);
    // Whatever happens next, the result on screen is this submission's or none.
    setAnswer(undefined);
    let parsed: unknown;
    try {
      parsed = JSON.parse(payload);
    } catch (err) {
      setInvalid(parseProblem(payload, err));
      return;
    }
    const read = parseHeaderLines(headers);
    if ('problem' in read) {
      setInvalid(read.problem);
      return;
    }
    setInvalid(undefined);
    setBusy(true);
    try {
      const file = ofText ? props.unsaved?.text() : undefined;
      const attributes = {
        payload: parsed as never,
        headers: read.headers,
        ...(deliveryId.trim() ? { delivery_id: deliveryId.trim() } : {}),
        ...(file === undefined ? { version: Number(version) } : { workflow_file: file }),
        call,
        ...(trigger ? { trigger_key: trigger } : {}),
      };
      const doc = await client.testRun(props.workflowId, attributes);
      setAnswer(doc.data?.attributes as unknown as TestRunAnswer);
    } catch (err) {
      setAnswer(undefined);
      // A problem of the unsaved text is also marked at its line in the editor.
      if (ofText) props.unsaved?.markError(err);
      setError(err);
    } finally {
      setBusy(false);
    }
  };

  return (
    <div class="wf-test-run">
      <form onSubmit={submit} noValidate aria-label="Test run">
        <p class="muted small">
          Runs the chosen version{props.unsaved ? " (or the editor's unsaved text)" : ''} on your payload with the worker's own steps. Nothing is stored and
          nothing is written.
        </p>
        <Field label="Sample payload (JSON)" hint="What a trigger would deliver; the steps read it as payload.">
          <textarea
            name="payload"
            rows={8}
            spellcheck={false}
            value={payload}
            onInput={(e) => edit(setPayload)(e.currentTarget.value)}
            aria-invalid={invalid ? true : undefined}
            aria-describedby={invalid ? 'payload-problem' : undefined}
          />
        </Field>
        <Field
          label="Sample headers"
          hint="One 'Name: value' a line; the steps read them as delivery.headers (names lowercased, credentials and signatures left out)."
        >
          <textarea name="headers" rows={4} spellcheck={false} value={headers} onInput={(e) => edit(setHeaders)(e.currentTarget.value)} />
        </Field>
        <Field label="Delivery id" hint="What the steps read as delivery.id; empty: the delivery-id header's value, if one is given.">
          <input name="delivery_id" value={deliveryId} onInput={(e) => edit(setDeliveryId)(e.currentTarget.value)} />
        </Field>
        {sampleFrom && <p class="muted small">The sample is {sampleFrom}.</p>}
        {invalid && (
          <p id="payload-problem" class="notice error" role="alert">
            {invalid}
          </p>
        )}
        {props.unsaved && props.workflowId !== null && (
          <label class="checkbox">
            <input type="checkbox" name="unsaved" checked={ofText} onChange={(e) => setOfText(e.currentTarget.checked)} /> Test the editor's text (unsaved)
            instead of a saved version
          </label>
        )}
        <div class="filters">
          {!ofText && <VersionSelect label="Version" value={version} versions={props.versions} current={props.current} onChange={setVersion} />}
          <Field label="Calls">
            <select name="call" value={call} onChange={(e) => setCall(e.currentTarget.value as 'none' | 'safe')}>
              <option value="none">none: send no request</option>
              <option value="safe">safe: send GET, HEAD and OPTIONS</option>
            </select>
          </Field>
          <Field label="Trigger">
            <select name="trigger" value={trigger} onChange={(e) => setTrigger(e.currentTarget.value)}>
              <option value="">none (trigger.key is null)</option>
              {props.triggerKeys.map((k) => (
                <option value={k}>{k}</option>
              ))}
            </select>
          </Field>
        </div>
        <button type="submit" disabled={busy} aria-busy={busy}>
          {busy ? 'Running test…' : 'Run test'}
        </button>
      </form>
      <ErrorNotice error={error} title="The test run failed" />
      {answer && (
        <section class="wf-test-result" aria-labelledby="test-result-title">
          <h3 id="test-result-title">
            Result of {answer.workflow_version === null ? 'the unsaved text' : `version ${answer.workflow_version}`}: <Badge value={answer.status} />{' '}
            <Badge value={answer.outcome} />
          </h3>
          <p>
            Facts it would write: <strong>{answer.facts_would_write}</strong>. Nothing was stored.
          </p>
          {answer.error && <p class="notice error">{answer.error}</p>}
          {answer.steps.map((s, i) => (
            <StepResult step={s} index={i} />
          ))}
        </section>
      )}
    </div>
  );
}
