/**
 * One run: what it is, each step in order (the context it read, its output, error or
 * reason; nested steps' records under their step), the delivery that started it, its
 * replays; replay it on the original or the current version, cancel it while it is queued,
 * retrying or waiting. While it is unfinished, the page refreshes itself; a waiting run says
 * when it resumes and what it waits for.
 */
import { useEffect, useState } from 'preact/hooks';
import { useClient, useLoad } from '../api.ts';
import { href, navigate } from '../router.ts';
import { ActionButton, Badge, Duration, ErrorNotice, Field, Json, Loading, Page, Section, Table, Time, type Column } from '../ui/index.tsx';
import { CancelRun } from './run-cancel.tsx';
import { parkedRecord, RunSteps, stepDefs } from './runs-steps.tsx';
import { stepNote, type FlowStep } from './workflow-flow-rows.ts';
import {
  CANCELLABLE,
  ErrorText,
  formatBytes,
  RunBadges,
  RunLink,
  shortId,
  UNFINISHED,
  workflowNames,
  type Included,
  type Run,
  type RunList,
} from './runs-model.tsx';

const REFRESH_MS = 1000;
/** A waiting run changes at its time or a delivery: read less often than a running one. */
const WAITING_REFRESH_MS = 5000;

interface RunDoc {
  data: Run;
  included?: Included[];
}

function ReplayControls(props: { run: Run; currentVersion: number | undefined }) {
  const client = useClient();
  // A failed run is replayed mostly after a fix, which is a new version: the current one is
  // the default then; otherwise the run's own. A choice made here outlives the page's refresh.
  const [chosen, setVersion] = useState<'original' | 'current' | undefined>(undefined);
  const version = chosen ?? (props.run.attributes.status === 'failed' ? 'current' : 'original');
  const replay = async () => {
    const made = await client.replay(props.run.id, version);
    navigate(href('runs', made.data.id));
  };
  return (
    <div class="replay-controls">
      <Field label="Replay on">
        <select value={version} onChange={(e) => setVersion((e.currentTarget as HTMLSelectElement).value as 'original' | 'current')}>
          <option value="original">Original version (v{props.run.attributes.workflow_version})</option>
          <option value="current">Current version{props.currentVersion !== undefined ? ` (v${props.currentVersion})` : ''}</option>
        </select>
      </Field>
      <ActionButton label="Replay" busyLabel="Replaying…" onRun={replay} />
    </div>
  );
}

function Headers(props: { headers: Record<string, string> | null | undefined }) {
  if (props.headers === undefined) return <p class="muted">This server does not report a delivery's headers.</p>;
  if (props.headers === null || Object.keys(props.headers).length === 0)
    return <p class="muted">No headers recorded: the run was not made by a delivery (a schedule), or before headers were kept.</p>;
  const rows = Object.entries(props.headers);
  return (
    <Table
      caption="Delivery headers; secret values are shown as [redacted]"
      columns={[
        { title: 'Header', cell: ([k]) => <code>{k}</code> },
        { title: 'Value', cell: ([, v]) => (v === '[redacted]' ? <span class="muted">[redacted]</span> : <code class="wrap">{v}</code>) },
      ]}
      rows={rows}
      rowKey={([k]) => k}
    />
  );
}

export function RunPage(props: { id: string }) {
  const client = useClient();
  const run = useLoad(
    async () => (await client.request('GET', `/workflow_runs/${encodeURIComponent(props.id)}?include=workflow`)) as RunDoc,
    [client, props.id],
  );
  const replays = useLoad(
    async () => (await client.request('GET', `/workflow_runs?filter[replay_of]=${encodeURIComponent(props.id)}&page[limit]=50`)) as RunList,
    [client, props.id],
  );
  const a = run.data?.data.attributes;
  const workflow = run.data?.included?.find((r) => r.type === 'workflow' && r.id === a?.workflow_id);
  // The steps of the version it ran say each step's type (a condition's value reads as such) and what a wait waits for.
  const version = useLoad(async () => {
    if (!a) return undefined;
    const doc = (await client.request(
      'GET',
      `/workflow_versions?filter[workflow_id]=${encodeURIComponent(a.workflow_id)}&filter[version]=${a.workflow_version}&fields[workflow_version]=steps,on_failure`,
    )) as { data: Array<{ attributes?: { steps?: FlowStep[] | null; on_failure?: FlowStep[] | null } }> };
    return stepDefs(doc.data[0]?.attributes?.steps, doc.data[0]?.attributes?.on_failure);
  }, [client, a?.workflow_id, a?.workflow_version]);

  // Unfinished: read it again every second until it finishes (and its replays with it);
  // a hidden tab asks nothing and reads it again when shown.
  const unfinished = a !== undefined && UNFINISHED.has(a.status);
  const every = a?.status === 'waiting' ? WAITING_REFRESH_MS : REFRESH_MS;
  const updated = a?.updated_at;
  useEffect(() => {
    if (!unfinished || run.loading) return;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const refresh = () => {
      run.reload();
      replays.reload();
    };
    const onVisibility = () => {
      clearTimeout(timer);
      if (document.visibilityState === 'visible') refresh();
    };
    if (document.visibilityState === 'visible') timer = setTimeout(refresh, every);
    document.addEventListener('visibilitychange', onVisibility);
    return () => {
      clearTimeout(timer);
      document.removeEventListener('visibilitychange', onVisibility);
    };
  }, [unfinished, updated, run.loading, every]);

  if (!run.data) {
    return (
      <Page title={`Run ${shortId(props.id)}`}>
        {run.error ? <ErrorNotice error={run.error} title="Could not load the run" /> : <Loading label="Loading the run…" />}
      </Page>
    );
  }
  const r = run.data.data;
  const at = r.attributes;
  const names = workflowNames(run.data);
  const defs = version.data ?? new Map<string, FlowStep>();
  const parked = at.status === 'waiting' ? parkedRecord(at.steps) : undefined;
  const parkedDef = parked ? defs.get(parked.key) : undefined;

  const replayColumns: Column<Run>[] = [
    {
      title: 'Run',
      cell: (x) => <RunLink id={x.id} />,
    },
    { title: 'Version', numeric: true, cell: (x) => `v${x.attributes.workflow_version}` },
    {
      title: 'Status',
      cell: (x) => <RunBadges run={x} />,
    },
    { title: 'Facts', numeric: true, cell: (x) => x.attributes.facts_written },
    { title: 'Inserted', cell: (x) => <Time value={x.attributes.inserted_at} /> },
  ];

  return (
    <Page
      title={`Run ${shortId(r.id)}`}
      actions={
        <>
          <ReplayControls run={r} currentVersion={workflow?.attributes?.version} />
          {CANCELLABLE.has(at.status) && <CancelRun id={r.id} status={at.status} onCancelled={run.reload} />}
        </>
      }
    >
      <ErrorNotice error={run.error} title="Could not refresh the run" />
      {unfinished && at.status !== 'waiting' && (
        <p class="notice info" role="status">
          This run is {at.status}; the page refreshes until it finishes.
        </p>
      )}
      {at.status === 'waiting' && (
        <p class="notice info" role="status" data-testid="run-waiting">
          This run is waiting{parked ? ` at step ${parked.key}` : ''}
          {parkedDef ? ` (${parkedDef.type.replaceAll('_', ' ')}: ${stepNote(parkedDef) ?? 'a wait'})` : ''}; it holds no worker and resumes at{' '}
          <Time value={at.resume_at} /> at the latest. The page reads it again every few seconds.
        </p>
      )}
      <Section title="Summary">
        <dl class="props">
          <dt>Run</dt>
          <dd>
            <code>{r.id}</code>
          </dd>
          <dt>Status</dt>
          <dd data-testid="run-status">
            <Badge value={at.status} />
          </dd>
          <dt>Outcome</dt>
          <dd>
            <Badge value={at.outcome} />
          </dd>
          <dt>Workflow</dt>
          <dd>
            <a href={href('workflows', at.workflow_id)}>{names.get(at.workflow_id) ?? at.workflow_id}</a> <span>version {at.workflow_version}</span>
            {workflow?.attributes?.version !== undefined && workflow.attributes.version !== at.workflow_version && (
              <span class="muted small"> (current: {workflow.attributes.version})</span>
            )}
          </dd>
          <dt>Trigger</dt>
          <dd>{at.trigger_key ?? <span class="muted">none</span>}</dd>
          {at.concurrency_key != null && (
            <>
              <dt>Concurrency key</dt>
              <dd data-testid="concurrency-key">
                <code class="wrap">{at.concurrency_key === '' ? '""' : at.concurrency_key}</code>{' '}
                <span class="muted small">(limit {at.concurrency_limit})</span>
              </dd>
            </>
          )}
          <dt>Delivery id</dt>
          <dd>{at.delivery_id ? <code class="wrap">{at.delivery_id}</code> : <span class="muted">none{at.replay_of ? ' (a replay)' : ''}</span>}</dd>
          {at.resume_at && (
            <>
              <dt>Resumes at</dt>
              <dd data-testid="run-resume-at">
                <Time value={at.resume_at} /> <span class="muted small">(at the latest)</span>
              </dd>
            </>
          )}
          <dt>Attempts</dt>
          <dd>
            {at.attempt} of {at.max_attempts}
          </dd>
          <dt>Facts written</dt>
          <dd>{at.facts_written}</dd>
          <dt>Trace</dt>
          <dd data-testid="trace-id">{at.trace_id ? <code class="wrap">{at.trace_id}</code> : <span class="muted">none (tracing was off)</span>}</dd>
          {at.replay_of && (
            <>
              <dt>Replay of</dt>
              <dd>
                <a href={href('runs', at.replay_of)} data-testid="replay-of" aria-label={`Original run ${at.replay_of}`}>
                  <code>{at.replay_of}</code>
                </a>
              </dd>
            </>
          )}
          {(
            [
              ['Inserted', at.inserted_at],
              ['Started', at.started_at],
              ['Finished', at.finished_at],
            ] as const
          ).map(([label, value]) => (
            <>
              <dt>{label}</dt>
              <dd>
                <Time value={value} />
              </dd>
            </>
          ))}
          <dt>Duration</dt>
          <dd>
            <Duration from={at.started_at} to={at.finished_at} />
          </dd>
          <dt>Updated</dt>
          <dd>
            <Time value={at.updated_at} />
          </dd>
        </dl>
        <ErrorText text={at.error} />
      </Section>
      <Section title="Steps">
        <RunSteps run={r} defs={defs} />
      </Section>
      <Section title="Delivery">
        <h3>Payload</h3>
        {at.payload_truncated ? (
          <>
            <p class="muted small">
              A preview: the first 512 bytes of the payload's {formatBytes(at.payload_bytes)} of JSON. The whole payload is stored;{' '}
              <code>tributary runs show</code> prints it.
            </p>
            <pre class="json" tabIndex={0} aria-label="Payload preview">
              {String(at.payload)}
            </pre>
          </>
        ) : (
          <Json value={at.payload} label="Payload" />
        )}
        {at.payload_bytes !== undefined && !at.payload_truncated && <p class="muted small">{formatBytes(at.payload_bytes)} of JSON.</p>}
        <h3>Headers</h3>
        <Headers headers={at.delivery_headers} />
      </Section>
      <Section title="Replays of this run">
        <ErrorNotice error={replays.error} title="Could not load the replays" />
        {replays.data ? (
          <Table
            caption="Replays of this run, newest first"
            columns={replayColumns}
            rows={replays.data.data}
            rowKey={(x) => x.id}
            empty="This run has not been replayed."
          />
        ) : (
          !replays.error && <Loading label="Loading replays…" />
        )}
      </Section>
    </Page>
  );
}
