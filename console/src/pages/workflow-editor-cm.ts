/**
 * The workflow file editor's heavy half, imported only by the workflow pages (its own chunk,
 * scripts/build-console.ts): CodeMirror 6 with YAML highlighting and lint markers, and the one
 * reader of workflow files (src/workflows/file.ts) the CLI and the server use, so a problem
 * found here, or a save's error mapped back here, sits at the line the server means.
 */
import { EditorState } from '@codemirror/state';
import { EditorView, keymap, lineNumbers, highlightActiveLine, drawSelection } from '@codemirror/view';
import { defaultKeymap, history, historyKeymap } from '@codemirror/commands';
import { bracketMatching, defaultHighlightStyle, indentOnInput, syntaxHighlighting } from '@codemirror/language';
import { yaml } from '@codemirror/lang-yaml';
import { forceLinting, lintGutter, linter, type Diagnostic } from '@codemirror/lint';
import {
  builderParts,
  filePathOfPointer,
  parseWorkflowText,
  renderYaml,
  stepsDiffer,
  WORKFLOW_FILE_HEADER,
  workflowFileDocument,
  WorkflowFileProblem,
  workflowOfResource,
  type Position,
  type WorkflowFile,
} from '../../../src/workflows/file.ts';

export { builderParts, filePathOfPointer, parseWorkflowText, stepsDiffer, WorkflowFileProblem, type WorkflowFile };

/** A problem to mark: its line (1-based), and the column when known. */
export interface Problem extends Position {
  message: string;
}

/** The file of a workflow resource's attributes, as `workflow get --yaml` writes it. */
export function workflowYaml(attributes: Record<string, unknown>): string {
  return renderYaml(workflowFileDocument(workflowOfResource(attributes), undefined), WORKFLOW_FILE_HEADER);
}

/** The text's own problem (its YAML, its file shape), where it is; none when it reads. */
export function localProblem(text: string): Problem | undefined {
  try {
    parseWorkflowText(text);
    return undefined;
  } catch (err) {
    if (err instanceof WorkflowFileProblem) return { line: err.position?.line ?? 1, column: err.position?.column ?? 1, message: err.message };
    return { line: 1, column: 1, message: String(err) };
  }
}

export interface EditorHandle {
  text(): string;
  setText(text: string): void;
  /** Marks what the server said (a save's or test run's error); cleared by the next edit. */
  setProblems(problems: Problem[]): void;
  focus(): void;
  destroy(): void;
}

function toDiagnostic(doc: EditorState['doc'], p: Problem): Diagnostic {
  const line = doc.line(Math.min(Math.max(1, p.line), doc.lines));
  const from = Math.min(line.from + Math.max(0, p.column - 1), line.to);
  return { from, to: line.to > from ? line.to : from, severity: 'error', message: p.message };
}

/**
 * The editor in a shadow root of `host`: CodeMirror's styles then go in as a constructed
 * stylesheet (adoptedStyleSheets), which the console's CSP (style-src 'self') allows, where
 * the <style> element it adds to a document would be refused.
 */
export function mountEditor(host: HTMLElement, text: string, opts: { label: string; onChange: (text: string) => void }): EditorHandle {
  const parent = host.shadowRoot ?? host.attachShadow({ mode: 'open' });
  parent.replaceChildren();
  let server: Problem[] = [];
  const lint = linter(
    (view) => {
      const own = localProblem(view.state.doc.toString());
      return [...(own ? [own] : []), ...server].map((p) => toDiagnostic(view.state.doc, p));
    },
    { delay: 400 },
  );
  const view = new EditorView({
    parent,
    root: parent,
    state: EditorState.create({
      doc: text,
      extensions: [
        lineNumbers(),
        history(),
        drawSelection(),
        highlightActiveLine(),
        indentOnInput(),
        bracketMatching(),
        syntaxHighlighting(defaultHighlightStyle, { fallback: true }),
        yaml(),
        lint,
        lintGutter(),
        // Tab is left to the browser: it moves focus out of the editor, so the keyboard is never trapped.
        keymap.of([...defaultKeymap, ...historyKeymap]),
        // tabindex: axe counts a scrolled file's scroller keyboard-reachable only through a tabbable child (contenteditable is not enough for it).
        EditorView.contentAttributes.of({ 'aria-label': opts.label, 'aria-multiline': 'true', tabindex: '0' }),
        EditorView.theme({
          '&': { border: '1px solid #8a8f98', borderRadius: '4px', fontSize: '14px', backgroundColor: '#fff', color: '#1b1f24' },
          '&.cm-focused': { outline: '3px solid #1a5fb4', outlineOffset: '1px' },
          '.cm-scroller': { fontFamily: 'ui-monospace, SFMono-Regular, Menlo, Consolas, monospace', minHeight: '16em', maxHeight: '60vh' },
          '.cm-gutters': { backgroundColor: '#f3f4f6', color: '#4b5261', borderRight: '1px solid #d0d4da' },
        }),
        EditorView.updateListener.of((u) => {
          if (!u.docChanged) return;
          server = [];
          opts.onChange(u.state.doc.toString());
        }),
      ],
    }),
  });
  return {
    text: () => view.state.doc.toString(),
    setText: (t) => view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: t } }),
    setProblems: (problems) => {
      server = problems;
      forceLinting(view);
    },
    focus: () => view.focus(),
    destroy: () => view.destroy(),
  };
}
