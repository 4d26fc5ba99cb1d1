import { Page } from '../ui/index.tsx';

export function RunPage(props: { id: string }) {
  void props;
  return (
    <Page title="RunPage">
      <p>Coming soon.</p>
    </Page>
  );
}
