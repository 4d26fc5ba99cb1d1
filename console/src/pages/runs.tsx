import { Page } from '../ui/index.tsx';

export function RunsPage(props: { query: URLSearchParams }) {
  void props;
  return (
    <Page title="RunsPage">
      <p>Coming soon.</p>
    </Page>
  );
}
