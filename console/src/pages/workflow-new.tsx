/**
 * A new workflow from a template (workflow-templates.ts): the template's file in the editor,
 * a test run of the text, and Create, which saves it and opens the new workflow's page.
 */
import { useRef } from 'preact/hooks';
import { href, navigate } from '../router.ts';
import { Page, Section } from '../ui/index.tsx';
import { WorkflowEditor, type EditorApi } from './workflow-editor.tsx';
import { TestRun } from './workflow-test-run.tsx';
import { WORKFLOW_TEMPLATES } from './workflow-templates.ts';

export function NewWorkflowPage(props: { query: URLSearchParams }) {
  const chosen = WORKFLOW_TEMPLATES.find((t) => t.id === props.query.get('template'));
  const editorApi = useRef<EditorApi | undefined>(undefined);
  const unsaved = { text: () => editorApi.current?.text(), markError: (err: unknown) => editorApi.current?.markError(err) ?? false };
  return (
    <Page title="New workflow" actions={<a href={href('workflows')}>Back to the workflows</a>}>
      <Section title="Start from a template">
        <ul class="wf-templates">
          {WORKFLOW_TEMPLATES.map((t) => (
            <li>
              <a href={href('workflows', 'new', { template: t.id })} aria-current={chosen?.id === t.id ? 'true' : undefined}>
                {t.title}
              </a>
              <span class="muted small"> — {t.summary}</span>
            </li>
          ))}
        </ul>
      </Section>
      {chosen && (
        <>
          <Section title={`The file: ${chosen.title}`}>
            <WorkflowEditor
              key={chosen.id}
              workflowId={null}
              base={chosen.yaml}
              lockVersion={null}
              triggers={[]}
              onSaved={(id) => navigate(href('workflows', id))}
              api={(api) => (editorApi.current = api)}
            />
          </Section>
          <Section title="Test run of the text">
            <TestRun workflowId={null} versions={[]} current={0} triggerKeys={[]} unsaved={unsaved} />
          </Section>
        </>
      )}
    </Page>
  );
}
