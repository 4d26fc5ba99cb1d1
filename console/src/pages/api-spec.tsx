import { Page } from '../ui/index.tsx';

export function ApiSpecPage(props: { id: string }) {
  void props;
  return (
    <Page title="ApiSpecPage">
      <p>Coming soon.</p>
    </Page>
  );
}
