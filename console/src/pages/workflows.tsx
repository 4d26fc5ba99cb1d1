/** The workflows of the workspace, by name, a page at a time. */
import { useState } from 'preact/hooks';
import type { Page as ListPage } from '@tributary/client';
import { useClient, useLoad } from '../api.ts';
import { href } from '../router.ts';
import { Badge, ErrorNotice, Loading, Page, Pager, Table, Time } from '../ui/index.tsx';

const PAGE_SIZE = 25;

interface Row {
  id: string;
  name: string;
  is_active: boolean;
  version: number;
  triggers: Array<{ type: string }>;
  updated_at: string;
}

/** "2: 1 webhook, 1 schedule". */
export function triggerSummary(triggers: Array<{ type: string }>): string {
  if (triggers.length === 0) return 'none';
  const kinds = new Map<string, number>();
  for (const t of triggers) kinds.set(t.type, (kinds.get(t.type) ?? 0) + 1);
  return `${triggers.length}: ${[...kinds].map(([kind, n]) => `${n} ${kind}`).join(', ')}`;
}

export function WorkflowsPage() {
  const client = useClient();
  // The pages seen so far: Next loads the one after the last, Previous goes back one.
  const [stack, setStack] = useState<ListPage<'workflows'>[]>([]);
  const [error, setError] = useState<unknown>(undefined);
  const first = useLoad(
    () =>
      client.list('workflows', { sort: 'name', page: { limit: PAGE_SIZE }, fields: { workflow: ['name', 'is_active', 'version', 'triggers', 'updated_at'] } }),
    [],
  );
  const pages = first.data ? [first.data, ...stack] : [];
  const current = pages[pages.length - 1];
  const next = async () => {
    if (!current) return;
    setError(undefined);
    try {
      const page = await current.next();
      if (page) setStack([...stack, page]);
    } catch (err) {
      setError(err);
    }
  };
  const rows = (current?.data ?? []).map((r) => ({ id: r.id, ...(r.attributes as unknown as Omit<Row, 'id'>) }));
  return (
    <Page title="Workflows">
      <p class="muted small">
        Apply workflows with the CLI (<code>tributary workflow apply -f FILE</code>) or the API; open one to see its flow, versions and triggers and to test it.
      </p>
      <ErrorNotice error={first.error ?? error} title="Could not load the workflows" />
      {!current && first.loading && <Loading />}
      {current && (
        <>
          <Table<Row>
            caption={`Workflows, page ${pages.length}`}
            rows={rows}
            rowKey={(r) => r.id}
            empty="No workflows yet."
            columns={[
              { title: 'Name', cell: (r) => <a href={href('workflows', r.id)}>{r.name}</a> },
              { title: 'State', cell: (r) => <Badge value={r.is_active ? 'active' : 'inactive'} /> },
              { title: 'Version', cell: (r) => r.version, numeric: true },
              { title: 'Triggers', cell: (r) => triggerSummary(r.triggers ?? []) },
              { title: 'Updated', cell: (r) => <Time value={r.updated_at} /> },
            ]}
          />
          <Pager
            label="Workflow pages"
            onPrev={stack.length > 0 ? () => setStack(stack.slice(0, -1)) : undefined}
            onNext={current.links.next ? next : undefined}
          />
        </>
      )}
    </Page>
  );
}
