import { Page } from '../ui/index.tsx';

export function ConnectorsPage() {
  return (
    <Page title="ConnectorsPage">
      <p>Coming soon.</p>
    </Page>
  );
}
