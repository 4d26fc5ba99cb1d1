import { Page } from '../ui/index.tsx';

export function WorkflowsPage() {
  return (
    <Page title="WorkflowsPage">
      <p>Coming soon.</p>
    </Page>
  );
}
