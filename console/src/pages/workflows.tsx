/** The workflows of the workspace, by name, a page at a time. */
import type { ResourceOf } from '@tributary/client';
import { useClient } from '../api.ts';
import { href } from '../router.ts';
import { Badge, Page, Time } from '../ui/index.tsx';
import { PagedList } from '../ui/paged-list.tsx';

const PAGE_SIZE = 25;

/** A workflow's attributes as this list reads them. */
interface Row {
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
  const row = (r: ResourceOf<'workflows'>) => (r.attributes ?? {}) as Partial<Row>;
  return (
    <Page title="Workflows" actions={<a href={href('workflows', 'new')}>New workflow</a>}>
      <p class="muted small">
        Apply workflows with the CLI (<code>tributary workflow apply -f FILE</code>), the API or here (New workflow, from a template); open one to see its flow,
        versions and triggers, to edit its file and to test it.
      </p>
      <PagedList
        load={() =>
          client.list('workflows', {
            sort: 'name',
            page: { limit: PAGE_SIZE },
            fields: { workflow: ['name', 'is_active', 'version', 'triggers', 'updated_at'] },
          })
        }
        deps={[client]}
        errorTitle="Could not load the workflows"
        caption={(n) => `Workflows, page ${n}`}
        pagerLabel="Workflow pages"
        empty="No workflows yet."
        columns={[
          { title: 'Name', cell: (r) => <a href={href('workflows', r.id)}>{row(r).name}</a> },
          { title: 'State', cell: (r) => <Badge value={row(r).is_active ? 'active' : 'inactive'} /> },
          { title: 'Version', cell: (r) => row(r).version, numeric: true },
          { title: 'Triggers', cell: (r) => triggerSummary(row(r).triggers ?? []) },
          { title: 'Updated', cell: (r) => <Time value={row(r).updated_at} /> },
        ]}
      />
    </Page>
  );
}
