import { Page } from '../ui/index.tsx';

export function WorkflowPage(props: { id: string; query: URLSearchParams }) {
  void props;
  return (
    <Page title="WorkflowPage">
      <p>Coming soon.</p>
    </Page>
  );
}
