/**
 * Bulk replay of the filtered list (POST /workflow_runs/replay with the same filters): a
 * confirmation that says how many runs at most and on which version, then what was done.
 * Without a filter it refuses, as the API does: a whole workspace is never replayed by accident.
 */
import { useRef, useState } from 'preact/hooks';
import { useClient } from '../api.ts';
import { ActionButton, Field } from '../ui/index.tsx';
import { apiParams, hasFilter, sdkFilter, type RunFilters } from './runs-model.tsx';

const REPLAYED: ReadonlySet<string> = new Set(['succeeded', 'failed']);

/** The API replays at most this many runs per call (meta.limit's largest value). */
const PER_CALL = 1000;

interface Confirm {
  atMost: number;
}

export function BulkReplay(props: { filters: RunFilters }) {
  const client = useClient();
  const [confirm, setConfirm] = useState<Confirm | undefined>(undefined);
  const [refused, setRefused] = useState(false);
  const [version, setVersion] = useState<'original' | 'current'>('original');
  const [result, setResult] = useState<{ replayed: number; hasMore: boolean } | undefined>(undefined);
  const dialog = useRef<HTMLDivElement>(null);

  const open = async () => {
    setResult(undefined);
    if (!hasFilter(props.filters)) {
      setRefused(true);
      setConfirm(undefined);
      return;
    }
    setRefused(false);
    // Only finished runs are replayed: the count asks for those (or the status filter given).
    const q = apiParams(props.filters);
    if (!props.filters.status) q.set('filter[status][in]', 'succeeded,failed');
    q.set('page[limit]', '1');
    q.set('page[count]', 'true');
    q.set('fields[workflow_run]', 'status');
    // Only succeeded and failed runs are replayed: any other status filter matches none.
    const unfinishedOnly = props.filters.status !== undefined && !REPLAYED.has(props.filters.status);
    const doc = unfinishedOnly ? undefined : ((await client.request('GET', `/workflow_runs?${q}`)) as { meta?: { page?: { total?: number } } });
    setConfirm({ atMost: Math.min(doc?.meta?.page?.total ?? 0, PER_CALL) });
    requestAnimationFrame(() => dialog.current?.focus());
  };

  const replay = async () => {
    const doc = (await client.bulkReplay(sdkFilter(props.filters) as never, { version })) as { meta?: { replayed?: number; has_more?: boolean } };
    setResult({ replayed: doc.meta?.replayed ?? 0, hasMore: doc.meta?.has_more === true });
    setConfirm(undefined);
  };

  return (
    <div class="bulk-replay">
      {!confirm && <ActionButton class="secondary" label="Replay these runs…" busyLabel="Counting…" onRun={open} />}
      {refused && (
        <div class="notice error" role="alert">
          <strong>Set a filter first</strong>
          <p>
            Bulk replay replays the runs of a filtered list. Choose a workflow, status, outcome, trigger or time range: a whole workspace is never replayed at
            once.
          </p>
        </div>
      )}
      {confirm && (
        <div class="confirm" role="group" aria-labelledby="bulk-title" tabIndex={-1} ref={dialog}>
          <h2 id="bulk-title">Replay these runs?</h2>
          {confirm.atMost === 0 ? (
            <p>No finished run matches these filters: there is nothing to replay. Queued, running, retrying, waiting and cancelled runs are never replayed.</p>
          ) : (
            <p>
              At most <strong data-testid="bulk-at-most">{confirm.atMost}</strong> finished run{confirm.atMost === 1 ? '' : 's'} of this list will run again,
              oldest first. Runs already replayed are left out; their replay stands for them.
            </p>
          )}
          <Field label="Version">
            <select value={version} onChange={(e) => setVersion((e.currentTarget as HTMLSelectElement).value as 'original' | 'current')}>
              <option value="original">Original: the version each run ran</option>
              <option value="current">Current: the workflow's version now</option>
            </select>
          </Field>
          <div class="confirm-actions">
            {confirm.atMost > 0 && <ActionButton label={`Replay at most ${confirm.atMost}`} busyLabel="Replaying…" onRun={replay} />}
            <button type="button" class="secondary" onClick={() => setConfirm(undefined)}>
              Cancel
            </button>
          </div>
        </div>
      )}
      {result && (
        <p class="notice info" role="status">
          Replayed {result.replayed} run{result.replayed === 1 ? '' : 's'}.{' '}
          {result.hasMore ? 'More runs match: replay again to go on where this stopped.' : 'No more runs match.'}
        </p>
      )}
    </div>
  );
}
