/**
 * Editing a workflow's file (the YAML of `workflow get --yaml`) in the console: CodeMirror,
 * loaded when this section first shows (workflow-editor-cm.ts, its own chunk), with the file's
 * own problems marked as you type and a save's or test run's error marked at its line; the
 * difference against the version the edit started from; a save with that lock_version, where
 * a change saved by someone else meanwhile is refused, said, and shown.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { TributaryError } from '@tributary/client';
import { useSession } from '../api.ts';
import { ErrorNotice } from '../ui/index.tsx';
import { lineDiff } from './workflow-diff-text.ts';
import type { EditorHandle, Problem } from './workflow-editor-cm.ts';

type Cm = typeof import('./workflow-editor-cm.ts');

let cmModule: Promise<Cm> | undefined;
/** The editor's chunk, fetched once per page load. */
export function loadEditor(): Promise<Cm> {
  cmModule ??= import('./workflow-editor-cm.ts');
  return cmModule;
}

export interface ExistingTrigger {
  id: string;
  key: string;
  type: string;
}

/** The problem a server error names in the file: its line from meta (a test run) or from its pointer (a save). */
export function problemOf(cm: Cm, error: unknown, text: string): Problem | undefined {
  if (!(error instanceof TributaryError)) return undefined;
  const meta = error.meta;
  if (meta && typeof meta.line === 'number')
    return {
      line: meta.line,
      column: typeof meta.column === 'number' ? meta.column : 1,
      message: `${meta.member ? `${String(meta.member)}: ` : ''}${error.detail ?? error.code}`,
    };
  if (error.pointer === undefined) return undefined;
  try {
    const parsed = cm.parseWorkflowText(text);
    const at = cm.filePathOfPointer(error.pointer, parsed.file);
    if (at === undefined) return undefined;
    return { ...parsed.locate(at), message: error.detail ?? error.code };
  } catch {
    return undefined;
  }
}

function Diff(props: { from: string; to: string; label: string; fromName: string; toName: string }) {
  const lines = lineDiff(props.from.split('\n'), props.to.split('\n'));
  const added = lines.filter((l) => l.op === '+').length;
  const removed = lines.filter((l) => l.op === '-').length;
  if (added + removed === 0)
    return (
      <p class="muted">
        No difference: {props.toName} is the same as {props.fromName}.
      </p>
    );
  return (
    <>
      <p>
        From {props.fromName} to {props.toName}: {added} {added === 1 ? 'line' : 'lines'} added (+), {removed} {removed === 1 ? 'line' : 'lines'} removed (−).
      </p>
      <pre class="diff" tabIndex={0} aria-label={props.label}>
        {lines.map((l) => (
          <span class={`diff-line ${l.op === '+' ? 'added' : l.op === '-' ? 'removed' : 'same'}`}>
            {l.op === '-' ? '−' : l.op} {l.text}
            {'\n'}
          </span>
        ))}
      </pre>
    </>
  );
}

export interface EditorApi {
  /** The editor's text now (undefined before it has loaded). */
  text: () => string | undefined;
  /** Marks a test run's error in the text; true when it named a line. */
  markError: (error: unknown) => boolean;
}

/**
 * The editor of one workflow's file (`workflowId` null: a new workflow, from `initial`).
 * `base` is the file the edit starts from, with its lock_version; `current` reads the
 * workflow as saved now (for a conflict); `onSaved` gets the saved workflow's id.
 */
export function WorkflowEditor(props: {
  workflowId: string | null;
  base: string;
  lockVersion: string | null;
  triggers: ExistingTrigger[];
  current?: () => Promise<string>;
  onSaved: (id: string, version: number) => void;
  api?: (api: EditorApi) => void;
}) {
  const session = useSession();
  const host = useRef<HTMLDivElement>(null);
  const editor = useRef<EditorHandle | undefined>(undefined);
  const cm = useRef<Cm | undefined>(undefined);
  const [text, setText] = useState(props.base);
  const [loadError, setLoadError] = useState<unknown>(undefined);
  const [ready, setReady] = useState(false);
  const [showDiff, setShowDiff] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const [marked, setMarked] = useState<string | undefined>(undefined);
  const [conflict, setConflict] = useState<string | undefined>(undefined);

  useEffect(() => {
    let live = true;
    loadEditor().then(
      (m) => {
        if (!live || !host.current) return;
        cm.current = m;
        editor.current = mountEditor(m);
        setReady(true);
      },
      (err: unknown) => live && setLoadError(err),
    );
    const mountEditor = (m: Cm) =>
      m.mountEditor(host.current!, props.base, {
        label: 'Workflow file (YAML)',
        onChange: (t) => {
          setText(t);
          setMarked(undefined);
        },
      });
    return () => {
      live = false;
      editor.current?.destroy();
      editor.current = undefined;
    };
  }, [props.base]);

  const mark = (err: unknown): boolean => {
    if (!cm.current || !editor.current) return false;
    const p = problemOf(cm.current, err, editor.current.text());
    if (!p) return false;
    editor.current.setProblems([p]);
    setMarked(`Line ${p.line}: ${p.message}`);
    return true;
  };

  useEffect(() => {
    props.api?.({ text: () => editor.current?.text(), markError: mark });
  });

  const save = async () => {
    const m = cm.current;
    const ed = editor.current;
    if (!m || !ed) return;
    setError(undefined);
    setConflict(undefined);
    const now = ed.text();
    const own = m.localProblem(now);
    if (own) {
      ed.setProblems([own]);
      setMarked(`Line ${own.line}: ${own.message}`);
      setError(new Error(`The file has a problem at line ${own.line}; nothing was saved.`));
      return;
    }
    const file = m.parseWorkflowText(now).file;
    let baseFile;
    try {
      baseFile = m.parseWorkflowText(props.base).file;
    } catch {
      baseFile = undefined;
    }
    const ids = new Map(props.triggers.map((t) => [`${t.type}:${t.key}`, t.id]));
    const parts = m.builderParts(file, session.credentialId);
    const attributes = {
      // A change of steps is a new version, as `workflow apply` decides: runs so far keep theirs.
      is_new_version: props.workflowId !== null && (baseFile === undefined || m.stepsDiffer(file, baseFile)),
      organization_id: session.organizationId,
      workflow_id: props.workflowId,
      // The version the edit started from: a save over a change made since is refused.
      lock_version: props.workflowId === null ? null : (file.lock_version ?? props.lockVersion),
      ...parts,
      trigger_params: parts.trigger_params.map((t) => {
        const id = ids.get(`${String(t.type)}:${String(t.key)}`);
        return id ? { ...t, id } : t;
      }),
    };
    setBusy(true);
    try {
      const doc = (await session.client.request('POST', '/workflows/save_builder_state', { data: { type: 'workflow_builder_state', attributes } })) as {
        data: { id: string; attributes: { version: number } };
      };
      // The page says so: it reloads, and the editor starts again on the saved file.
      props.onSaved(doc.data.id, doc.data.attributes.version);
    } catch (err) {
      if (err instanceof TributaryError && err.code === 'stale_lock_version') {
        setError(
          new Error(
            'Not saved: someone else saved this workflow since you started editing. The difference below is their change; copy yours into the current version and save again.',
          ),
        );
        try {
          setConflict(props.current ? await props.current() : undefined);
        } catch {
          setConflict(undefined);
        }
      } else {
        mark(err);
        setError(err);
      }
    } finally {
      setBusy(false);
    }
  };

  const startOver = async () => {
    if (!conflict || !editor.current) return;
    // The page reloads the workflow: its file and lock_version become the edit's new start.
    props.onSaved(props.workflowId ?? '', 0);
  };

  return (
    <div class="wf-editor">
      <p id="wf-editor-help" class="muted small">
        The workflow's file, as <code>tributary workflow get --yaml</code> writes it. Problems are marked at their line (the red marks in the gutter; F8 in the
        editor moves to the next). Tab leaves the editor; Escape then Tab if a completion is open.
      </p>
      {loadError !== undefined && <ErrorNotice error={loadError} title="The editor could not be loaded" />}
      <div ref={host} class="wf-editor-host" aria-busy={!ready} />
      {marked && (
        <p class="notice error small" role="status">
          {marked}
        </p>
      )}
      <div class="filters">
        <button type="button" onClick={save} disabled={!ready || busy} aria-busy={busy}>
          {busy ? 'Saving…' : props.workflowId === null ? 'Create the workflow' : 'Save'}
        </button>
        <button type="button" class="secondary" aria-expanded={showDiff} onClick={() => setShowDiff(!showDiff)} disabled={!ready}>
          {showDiff ? 'Hide the difference' : 'Show the difference'}
        </button>
      </div>
      {error !== undefined && <ErrorNotice error={error} title="Not saved" />}
      {conflict !== undefined && (
        <section aria-labelledby="wf-conflict-title" class="wf-conflict">
          <h3 id="wf-conflict-title">The other change</h3>
          <Diff
            from={props.base}
            to={conflict}
            label="The other change: from the version you started from to the current one"
            fromName="the version you started from"
            toName="the current version"
          />
          <button type="button" class="secondary" onClick={startOver}>
            Load the current version (your edit is replaced)
          </button>
        </section>
      )}
      {showDiff && (
        <section aria-labelledby="wf-diff-title">
          <h3 id="wf-diff-title">Your change</h3>
          <Diff from={props.base} to={text} label="Your change: from the saved version to the editor's text" fromName="the saved version" toName="your text" />
        </section>
      )}
    </div>
  );
}
