/**
 * Cancel a queued, retrying or waiting run (POST /workflow_runs/{id}/cancel), after a
 * confirmation in a native modal <dialog> as the delete one (ui/confirm-delete.tsx) asks:
 * focus moves into it and stays, Escape closes it. The page stays on the run, which it
 * reads again: it shows cancelled.
 */
import { useId, useRef, useState } from 'preact/hooks';
import { useClient } from '../api.ts';
import { ErrorNotice } from '../ui/index.tsx';
import { shortId } from './runs-model.tsx';

export function CancelRun(props: { id: string; status: string; onCancelled: () => void }) {
  const client = useClient();
  const dialog = useRef<HTMLDialogElement>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const titleId = useId();
  const open = () => {
    setError(undefined);
    dialog.current?.showModal();
  };
  const close = () => dialog.current?.close();
  const submit = async (e: Event) => {
    e.preventDefault();
    if (busy) return;
    setBusy(true);
    setError(undefined);
    try {
      await client.cancelRun(props.id);
      close();
      props.onCancelled();
    } catch (err) {
      // 409: it started running (or finished) since the page read it; the dialog says so.
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <>
      <button type="button" class="danger" onClick={open}>
        Cancel run…
      </button>
      <dialog ref={dialog} class="confirm-delete" aria-labelledby={titleId}>
        <form onSubmit={submit}>
          <h2 id={titleId}>Cancel run {shortId(props.id)}?</h2>
          <div class="confirm-delete-body">
            <p>
              The run is {props.status}. Cancelled, it never runs or resumes again
              {props.status === 'waiting' ? ', and a delivery it waits for starts a run of its own' : ''}. What its steps did so far stays recorded; Replay
              starts it again as a new run.
            </p>
          </div>
          <ErrorNotice error={error} title="The cancel was refused" />
          <div class="confirm-delete-actions">
            <button type="button" class="secondary" onClick={close}>
              Keep the run
            </button>
            <button type="submit" class="danger" disabled={busy} aria-busy={busy}>
              {busy ? 'Cancelling…' : 'Cancel run'}
            </button>
          </div>
        </form>
      </dialog>
    </>
  );
}
