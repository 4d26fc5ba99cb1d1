import { Page } from '../ui/index.tsx';

export function ConnectorPage(props: { id: string }) {
  void props;
  return (
    <Page title="ConnectorPage">
      <p>Coming soon.</p>
    </Page>
  );
}
