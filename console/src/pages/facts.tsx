import { Page } from '../ui/index.tsx';

export function FactsPage(props: { model: string | undefined; query: URLSearchParams }) {
  void props;
  return (
    <Page title="FactsPage">
      <p>Coming soon.</p>
    </Page>
  );
}
