/**
 * One workflow: what it is, its flow at any saved version (`?version=N`), the difference
 * between two versions (`?diff=2..5`), where its triggers take deliveries, and a test run.
 */
import { useRef, useState } from 'preact/hooks';
import { useClient, useLoad } from '../api.ts';
import { loadEditor, WorkflowEditor, type EditorApi } from './workflow-editor.tsx';
import { href, navigate } from '../router.ts';
import { Badge, ErrorNotice, Loading, Page, Section, Time } from '../ui/index.tsx';
import { loadVersions, type WorkflowStep, type WorkflowVersion } from './workflow-versions.ts';
import { Flow } from './workflow-flow.tsx';
import { parseDiff, VersionDiff } from './workflow-diff.tsx';
import { Triggers, type TriggerView } from './workflow-triggers.tsx';
import { TestRun } from './workflow-test-run.tsx';
import { VersionSelect } from './workflow-version-select.tsx';
import { ConfirmDelete } from '../ui/confirm-delete.tsx';

interface WorkflowAttributes {
  name: string;
  lock_version: string;
  description: string | null;
  is_active: boolean;
  version: number;
  steps: WorkflowStep[];
  triggers: TriggerView[];
  /** {key, limit}: at most limit runs of one key execute at once; null (or absent on a server without it): no limit. */
  concurrency?: { key: string; limit: number } | null;
  inserted_at: string;
  updated_at: string;
}

function CompareForm(props: { id: string; versions: WorkflowVersion[]; diff: [number, number] | undefined }) {
  const numbers = props.versions.map((v) => v.version);
  const [from, setFrom] = useState(String(props.diff?.[0] ?? numbers[1] ?? numbers[0] ?? 1));
  const [to, setTo] = useState(String(props.diff?.[1] ?? numbers[0] ?? 1));
  const submit = (e: Event) => {
    e.preventDefault();
    navigate(href('workflows', props.id, { diff: `${from}..${to}` }));
  };
  return (
    <form class="filters" onSubmit={submit} aria-label="Compare versions">
      <VersionSelect label="From version" value={from} versions={numbers} onChange={setFrom} />
      <VersionSelect label="To version" value={to} versions={numbers} onChange={setTo} />
      <button type="submit" class="secondary">
        Compare
      </button>
    </form>
  );
}

/**
 * The file of the workflow as loaded, in the editor; a save reloads the page, whose new
 * lock_version remounts the editor on the saved file.
 */
function EditSection(props: { id: string; workflow: WorkflowAttributes; onSaved: () => void; api: (api: EditorApi) => void }) {
  const client = useClient();
  // Said above the editor, which the reload remounts on the saved file.
  const [note, setNote] = useState<string | undefined>(undefined);
  const base = useLoad(async () => (await loadEditor()).workflowYaml(props.workflow as unknown as Record<string, unknown>), [props.workflow.lock_version]);
  const current = async () => {
    const doc = await client.get('workflows', props.id);
    return (await loadEditor()).workflowYaml(doc.data.attributes as unknown as Record<string, unknown>);
  };
  if (base.error) return <ErrorNotice error={base.error} title="The editor could not be loaded" />;
  if (base.data === undefined) return <Loading />;
  return (
    <>
      {note && (
        <p class="notice info" role="status">
          {note}
        </p>
      )}
      <WorkflowEditor
        key={props.workflow.lock_version}
        workflowId={props.id}
        base={base.data}
        lockVersion={props.workflow.lock_version}
        triggers={(props.workflow.triggers ?? []) as Array<{ id: string; key: string; type: string }>}
        current={current}
        onSaved={(_id, version) => {
          setNote(version > 0 ? `Saved: version ${version}.` : undefined);
          props.onSaved();
        }}
        api={props.api}
      />
    </>
  );
}

export function WorkflowPage(props: { id: string; query: URLSearchParams }) {
  const client = useClient();
  const editorApi = useRef<EditorApi | undefined>(undefined);
  const unsaved = { text: () => editorApi.current?.text(), markError: (err: unknown) => editorApi.current?.markError(err) ?? false };
  const loaded = useLoad(async () => {
    const doc = await client.get('workflows', props.id);
    const a = doc.data.attributes as unknown as WorkflowAttributes;
    const versions = await loadVersions(client, { id: props.id, version: a.version, steps: a.steps ?? [], updatedAt: a.updated_at ?? null });
    return { workflow: a, ...versions };
  }, [props.id]);

  if (loaded.error && !loaded.data)
    return (
      <Page title="Workflow">
        <ErrorNotice error={loaded.error} title="Could not load the workflow" />
        <p>
          <a href={href('workflows')}>Back to the workflows</a>
        </p>
      </Page>
    );
  if (!loaded.data)
    return (
      <Page title="Workflow">
        <Loading />
      </Page>
    );

  const { workflow: w, versions, listed } = loaded.data;
  const wanted = Number(props.query.get('version') ?? w.version);
  const shown = versions.find((v) => v.version === wanted) ?? versions[0]!;
  const diff = parseDiff(props.query.get('diff'));
  const diffFrom = diff && versions.find((v) => v.version === diff[0]);
  const diffTo = diff && versions.find((v) => v.version === diff[1]);
  const triggers = (w.triggers ?? []) as TriggerView[];

  return (
    <Page
      title={w.name}
      actions={
        <>
          <a href={href('runs', { workflow: props.id })}>Runs of this workflow</a>
          <ConfirmDelete
            what="workflow"
            name={w.name}
            after={href('workflows')}
            onDelete={() => client.request('DELETE', `/workflows/${encodeURIComponent(props.id)}`)}
          >
            <p>Its triggers stop taking deliveries at once and its schedules stop. Its runs stay readable; runs already queued finish.</p>
          </ConfirmDelete>
        </>
      }
    >
      <dl class="props">
        <dt>State</dt>
        <dd>
          <Badge value={w.is_active ? 'active' : 'inactive'} />
        </dd>
        <dt>Current version</dt>
        <dd>{w.version}</dd>
        <dt>Concurrency</dt>
        <dd data-testid="concurrency">
          {w.concurrency ? (
            <>
              at most {w.concurrency.limit} at once per <code class="wrap">{w.concurrency.key}</code>
            </>
          ) : (
            <span class="muted">no limit</span>
          )}
        </dd>
        <dt>Updated</dt>
        <dd>
          <Time value={w.updated_at} />
        </dd>
        {w.description && (
          <>
            <dt>Description</dt>
            <dd>{w.description}</dd>
          </>
        )}
      </dl>

      {diff && (
        <Section title={`Difference of versions ${diff[0]} and ${diff[1]}`} actions={<a href={href('workflows', props.id)}>Close the difference</a>}>
          {diffFrom && diffTo ? (
            <VersionDiff from={diffFrom} to={diffTo} />
          ) : (
            <p class="notice error" role="alert">
              {`Version ${!diffFrom ? diff[0] : diff[1]} is not a saved version of this workflow.`}
              {listed ? '' : ' This server lists only the current version.'}
            </p>
          )}
        </Section>
      )}

      <Section
        title="Flow"
        actions={
          <VersionSelect
            class="inline-field"
            label="Version"
            value={String(shown.version)}
            versions={versions.map((v) => v.version)}
            current={w.version}
            onChange={(v) => navigate(href('workflows', props.id, { version: v }), { replace: true })}
          />
        }
      >
        <p class="muted small">
          Version {shown.version}
          {shown.savedAt && (
            <>
              , saved <Time value={shown.savedAt} />
            </>
          )}
          {shown.version !== w.version && '. Triggers are the current ones: a version keeps only its steps.'}
          {!listed && '. This server lists only the current version.'}
        </p>
        <Flow key={shown.version} steps={shown.steps} triggers={triggers} version={shown.version} />
      </Section>

      {versions.length > 1 && (
        <Section title="Compare versions">
          <CompareForm id={props.id} versions={versions} diff={diff} />
        </Section>
      )}

      <Section title="Triggers">
        <Triggers triggers={triggers} />
      </Section>

      <Section title="Edit the file">
        <EditSection id={props.id} workflow={w} onSaved={loaded.reload} api={(api) => (editorApi.current = api)} />
      </Section>

      <Section title="Test run">
        <TestRun
          workflowId={props.id}
          versions={versions.map((v) => v.version)}
          current={w.version}
          triggerKeys={triggers.map((t) => t.key)}
          unsaved={unsaved}
        />
      </Section>
    </Page>
  );
}
