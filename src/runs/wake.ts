/**
 * Telling workers that a run is ready: this process's worker at once (the queue signal),
 * and on PostgreSQL the idle workers of other processes by NOTIFY.
 *
 * The NOTIFY is a statement of its own after the run has committed, with at most one in
 * flight per process (wakes meanwhile are folded into one more). PostgreSQL serializes
 * the commits of notifying transactions under a database-wide lock, so a NOTIFY inside
 * every accepting transaction would put all deliveries' commits in single file.
 */
import type { Db } from '../db/connect.ts';
import { notifyWorkers } from './notify.sql.ts';

export interface QueueSignal {
  wake(): void;
  /** Returns the unsubscribe function. */
  subscribe(listener: () => void): () => void;
}

export function queueSignal(): QueueSignal {
  const listeners = new Set<() => void>();
  return {
    wake: () => {
      for (const l of listeners) l();
    },
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
}

const notifying = new WeakMap<object, { again: boolean }>();

export function wakeWorkers(deps: { db: Db; engine: 'pglite' | 'postgres'; queueSignal: QueueSignal }): void {
  deps.queueSignal.wake();
  if (deps.engine !== 'postgres') return;
  const inFlight = notifying.get(deps.queueSignal);
  if (inFlight) {
    inFlight.again = true;
    return;
  }
  const state = { again: false };
  notifying.set(deps.queueSignal, state);
  const send = (): void => {
    // A lost NOTIFY costs latency, not runs: workers also poll.
    notifyWorkers(deps.db)
      .catch(() => undefined)
      .finally(() => {
        if (state.again) {
          state.again = false;
          send();
        } else {
          notifying.delete(deps.queueSignal);
        }
      });
  };
  send();
}
