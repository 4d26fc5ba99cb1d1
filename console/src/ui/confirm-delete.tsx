/**
 * A Delete button and its confirmation: a native modal <dialog> (focus moves into it and
 * stays there, Escape closes it), which says what goes with the thing and, for a data model,
 * asks for its slug typed out before the Delete inside it is enabled. After the delete the
 * page moves to the list it came from.
 */
import type { ComponentChildren } from 'preact';
import { useId, useRef, useState } from 'preact/hooks';
import { navigate } from '../router.ts';
import { ErrorNotice } from './index.tsx';

export function ConfirmDelete(props: {
  /** What it is, for the texts: "workflow", "connector", "data model". */
  what: string;
  /** Its name as the page shows it. */
  name: string;
  /** What goes with it, or what stays: a sentence or two. */
  children: ComponentChildren;
  /** A text the person must type before Delete is enabled (a data model's slug). */
  typeToConfirm?: string;
  onDelete: () => Promise<unknown>;
  /** Where to go once deleted: the list's href. */
  after: string;
}) {
  const dialog = useRef<HTMLDialogElement>(null);
  const [typed, setTyped] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const titleId = useId();
  const inputId = useId();
  const open = () => {
    setTyped('');
    setError(undefined);
    dialog.current?.showModal();
  };
  const close = () => dialog.current?.close();
  const confirmed = props.typeToConfirm === undefined || typed === props.typeToConfirm;
  const submit = async (e: Event) => {
    e.preventDefault();
    if (!confirmed || busy) return;
    setBusy(true);
    setError(undefined);
    try {
      await props.onDelete();
      close();
      navigate(props.after);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <>
      <button type="button" class="danger" onClick={open}>
        Delete {props.what}
      </button>
      <dialog ref={dialog} class="confirm-delete" aria-labelledby={titleId}>
        <form onSubmit={submit}>
          <h2 id={titleId}>
            Delete the {props.what} {props.name}?
          </h2>
          <div class="confirm-delete-body">{props.children}</div>
          {props.typeToConfirm !== undefined && (
            <p>
              <label for={inputId}>
                Type <code>{props.typeToConfirm}</code> to confirm
              </label>
              <input id={inputId} value={typed} autoComplete="off" spellcheck={false} onInput={(e) => setTyped((e.target as HTMLInputElement).value)} />
            </p>
          )}
          <ErrorNotice error={error} title="The delete was refused" />
          <div class="confirm-delete-actions">
            <button type="button" class="secondary" onClick={close}>
              Cancel
            </button>
            <button type="submit" class="danger" disabled={!confirmed || busy} aria-busy={busy}>
              {busy ? 'Deleting…' : `Delete ${props.what}`}
            </button>
          </div>
        </form>
      </dialog>
    </>
  );
}
