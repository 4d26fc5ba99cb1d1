/**
 * The runs of the workspace, newest first and live (runs-live.tsx), filtered by what the
 * address says (`#/runs?status=failed`), paged with the API's cursors, replayable in bulk.
 */
import { useState } from 'preact/hooks';
import { useClient, useLoad } from '../api.ts';
import { href } from '../router.ts';
import { Duration, ErrorNotice, Loading, Page, Pager, Table, Time, type Column } from '../ui/index.tsx';
import { BulkReplay } from './runs-bulk.tsx';
import { RunFiltersForm } from './runs-filters.tsx';
import { useLiveRuns } from './runs-live.tsx';
import { filtersFromQuery, RunBadges, RunLink, runsHref, shortId, type Run } from './runs-model.tsx';

export function RunsPage(props: { query: URLSearchParams }) {
  const client = useClient();
  const filters = filtersFromQuery(props.query);
  const key = runsHref(filters);
  // The page a cursor link points at, for this filter only: a new filter starts at the first page.
  const [at, setAt] = useState<{ key: string; path: string } | undefined>(undefined);
  const pagePath = at?.key === key ? at.path : undefined;
  const live = useLiveRuns(client, filters, key, pagePath);

  const workflows = useLoad(async () => {
    const out: Array<{ id: string; name: string }> = [];
    for await (const w of client.iterate('workflows', { sort: 'name', fields: { workflow: ['name'] } }))
      out.push({ id: w.id, name: (w.attributes as { name?: string } | undefined)?.name ?? w.id });
    return out;
  }, [client]);
  const names = new Map(live.names);
  for (const w of workflows.data ?? []) names.set(w.id, w.name);

  const columns: Column<Run>[] = [
    {
      title: 'Run',
      cell: (r) => <RunLink id={r.id} />,
    },
    {
      title: 'Workflow',
      cell: (r) => (
        <a href={href('workflows', r.attributes.workflow_id)}>
          {names.get(r.attributes.workflow_id) ?? shortId(r.attributes.workflow_id)}
          <span class="muted small"> v{r.attributes.workflow_version}</span>
        </a>
      ),
    },
    {
      title: 'Status',
      cell: (r) => <RunBadges run={r} />,
    },
    { title: 'Trigger', cell: (r) => r.attributes.trigger_key ?? <span class="muted">—</span> },
    { title: 'Attempt', numeric: true, cell: (r) => `${r.attributes.attempt}/${r.attributes.max_attempts}` },
    { title: 'Facts', numeric: true, cell: (r) => r.attributes.facts_written },
    { title: 'Inserted', cell: (r) => <Time value={r.attributes.inserted_at} /> },
    { title: 'Duration', numeric: true, cell: (r) => <Duration from={r.attributes.started_at} to={r.attributes.finished_at} /> },
  ];

  return (
    <Page title="Runs" actions={<BulkReplay filters={filters} />}>
      <RunFiltersForm filters={filters} workflows={workflows.data ?? []} />
      <ErrorNotice error={workflows.error} title="Could not load the workflows" />
      <ErrorNotice error={live.error} title="Could not load the runs" />
      <ErrorNotice error={live.pollError} title="Live updates failed; retrying" />
      <p class="visually-hidden" role="status">
        {live.arrived > 0 ? `${live.arrived} new run${live.arrived === 1 ? '' : 's'} arrived` : ''}
      </p>
      {live.loading && live.rows.length === 0 ? (
        <Loading label="Loading runs…" />
      ) : (
        <Table
          caption="Runs, newest first; new and changed runs appear as they happen"
          columns={columns}
          rows={live.rows}
          rowKey={(r) => r.id}
          stack
          empty={pagePath ? 'No runs on this page.' : 'No run matches yet. Runs appear here as deliveries arrive.'}
        />
      )}
      <Pager
        label="Pages of runs"
        onPrev={live.prev ? () => setAt({ key, path: live.prev! }) : undefined}
        onNext={live.next ? () => setAt({ key, path: live.next! }) : undefined}
      />
      {pagePath && (
        <p class="small">
          <a href={key} onClick={(e) => (e.preventDefault(), setAt(undefined))}>
            Back to the newest runs
          </a>
        </p>
      )}
    </Page>
  );
}
