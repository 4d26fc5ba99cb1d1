/**
 * What every page uses to talk to the API: the signed-in session's client, a hook that
 * loads something and says loading/error/data, and the text of an error for a person.
 */
import { createContext } from 'preact';
import { useCallback, useContext, useEffect, useRef, useState } from 'preact/hooks';
import { TributaryError, type TributaryClient } from '@tributary/client';
import type { Session } from './session.ts';

export const SessionContext = createContext<Session | null>(null);

export function useSession(): Session {
  const s = useContext(SessionContext);
  if (!s) throw new Error('useSession outside a signed-in page');
  return s;
}

export function useClient(): TributaryClient {
  return useSession().client;
}

export interface Loaded<T> {
  data: T | undefined;
  error: unknown;
  loading: boolean;
  reload: () => void;
}

/**
 * Runs `load` when `deps` change; an answer that arrives after a newer load started is
 * dropped, so a fast typist never sees an older list replace a newer one.
 */
export function useLoad<T>(load: () => Promise<T>, deps: readonly unknown[]): Loaded<T> {
  const [state, setState] = useState<{ data?: T; error?: unknown; loading: boolean }>({ loading: true });
  const generation = useRef(0);
  const run = useCallback(() => {
    const mine = ++generation.current;
    setState((s) => ({ ...s, loading: true }));
    load().then(
      (data) => mine === generation.current && setState({ data, loading: false }),
      (error: unknown) => mine === generation.current && setState((s) => ({ data: s.data, error, loading: false })),
    );
    // `deps` are the caller's: the load is remade exactly when they change.
  }, deps);
  useEffect(() => {
    run();
    return () => {
      generation.current++;
    };
  }, [run]);
  return { data: state.data, error: state.error, loading: state.loading, reload: run };
}

/** A person's sentence for an error: the API's detail, its code and the request id to quote. */
export function describeError(error: unknown): { message: string; code?: string; requestId?: string } {
  if (error instanceof TributaryError) {
    if (error.status === 0) return { message: 'The server did not answer. Check the connection and try again.', code: error.code };
    return { message: error.detail ?? error.message, code: error.code, requestId: error.requestId };
  }
  return { message: error instanceof Error ? error.message : String(error) };
}
