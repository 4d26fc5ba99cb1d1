/**
 * An inbound connector's status follows its deliveries: `verified` once a delivery passed
 * its check (signature or API key), `failing` once FAILING_AFTER consecutive deliveries seen
 * by one process failed it, with `last_error` saying what failed and when (never the secret
 * or the signature). docs/connectors.md, "Inbound status", says the same for users.
 *
 * The webhook path is the hot path, so the row is written only on a change of state:
 * - the status a delivery compares with is the one its admission read with the trigger
 *   (webhooks.sql.ts), so a steady state writes nothing; being in the lookup's digest, a
 *   change of it makes each process's cached admission of the trigger miss once, so the
 *   status compared with is the row's as of the accepting statement;
 * - failures are counted in memory, per process (a bounded map), never in the database;
 * - a connector gets at most one status statement per STATUS_WRITE_INTERVAL_MS per process:
 *   a change wanted sooner waits on a timer and is replaced by any later one, so a flood
 *   of bad signatures (or bad ones between good ones) costs at most one statement a second;
 * - the statement is a conditional UPDATE (`status is distinct from`) made after the
 *   delivery was answered, outside its statement: two processes that both see the change
 *   write the row once.
 * What is lost on a restart is only a count below FAILING_AFTER or a write still waiting
 * on its timer: the next delivery decides again.
 */
import type { Logger } from 'pino';
import type { Db } from '../db/connect.ts';
import { boundedMap } from '../bounded-map.ts';
import { recordInboundStatus } from './connectors.sql.ts';

/** Consecutive failed deliveries (seen by one process) that make an inbound connector `failing`. */
export const FAILING_AFTER = 3;
/** At most one status statement per connector per this many milliseconds, per process. */
export const STATUS_WRITE_INTERVAL_MS = 1000;
/** Inbound connectors whose failures a process counts at once; the oldest goes first past it. */
export const KEPT_INBOUND = 10_000;

/** One delivery's inbound check, as the webhook surface saw it. */
export interface InboundCheck {
  workspaceId: string;
  connectorId: string;
  /** The connector's status as the delivery's admission read it. */
  status: string | null;
  /** Undefined: the check passed. Else what failed, naming the header: `signature mismatch (X-Hub-Signature-256)`. */
  failure?: string;
  /** When the delivery was checked (deps.clock). */
  at: number;
}

interface Target {
  status: 'verified' | 'failing';
  error: string | null;
  at: Date;
}

interface Entry {
  workspaceId: string;
  connectorId: string;
  failures: number;
  /** The clock reading of the last statement sent (0: none yet). */
  lastWriteAt: number;
  /** The change the latest delivery asks for, waiting for its turn. */
  pending?: Target;
  timer?: ReturnType<typeof setTimeout>;
  /** Ends the timer's wait in settled() when close() clears it. */
  release?: () => void;
  writing?: Promise<void>;
}

export interface InboundStatus {
  /** Takes one delivery's check into account; never waits for the database. */
  observe(check: InboundCheck): void;
  /** Resolves once no change waits and every statement sent has finished: up to an interval (tests, shutdown after close). */
  settled(): Promise<void>;
  /** Drops the waiting changes and their timers. */
  close(): void;
  /** Checks seen and status statements sent, and how many of those changed a row (tests, profiles). */
  readonly counts: { observed: number; statements: number; changed: number };
}

/** `at` as the contract's instants are shown, to the second: 2026-12-02T05:01:02Z. */
const shownTime = (at: Date) => `${at.toISOString().slice(0, 19)}Z`;

export function inboundStatus(db: Db, clock: () => number, log: Logger, opts: { max?: number; intervalMs?: number } = {}): InboundStatus {
  const interval = opts.intervalMs ?? STATUS_WRITE_INTERVAL_MS;
  const max = opts.max ?? KEPT_INBOUND;
  const entries = boundedMap<string, Entry>(max);
  const inFlight = new Set<Promise<void>>();
  const counts = { observed: 0, statements: 0, changed: 0 };
  let closed = false;

  const write = (e: Entry) => {
    const t = e.pending;
    if (t === undefined || closed) return;
    e.pending = undefined;
    e.lastWriteAt = clock();
    counts.statements++;
    const p = recordInboundStatus(db, e.workspaceId, e.connectorId, t.status, t.error, t.at)
      .then((changed) => {
        if (changed) counts.changed++;
      })
      .catch((err: unknown) => {
        // Only the status is lost: the next delivery asks for it again.
        log.warn({ err, connector_id: e.connectorId }, 'inbound connector status not recorded');
      })
      .finally(() => {
        e.writing = undefined;
        inFlight.delete(p);
        if (e.pending !== undefined) schedule(e);
      });
    e.writing = p;
    inFlight.add(p);
  };

  const schedule = (e: Entry) => {
    if (e.timer !== undefined || e.writing !== undefined || closed) return;
    const wait = e.lastWriteAt + interval - clock();
    if (wait <= 0) return write(e);
    let fired!: () => void;
    const waiting = new Promise<void>((resolve) => (fired = resolve));
    inFlight.add(waiting);
    e.timer = setTimeout(
      () => {
        e.timer = undefined;
        inFlight.delete(waiting);
        write(e);
        fired();
      },
      Math.min(wait, interval),
    );
    e.release = () => {
      inFlight.delete(waiting);
      fired();
    };
    // A change waiting on its timer never keeps the process alive.
    e.timer.unref();
  };

  return {
    observe(c) {
      if (closed) return;
      counts.observed++;
      const key = `${c.workspaceId}/${c.connectorId}`;
      let e = entries.get(key);
      if (e === undefined) {
        e = { workspaceId: c.workspaceId, connectorId: c.connectorId, failures: 0, lastWriteAt: 0 };
        entries.set(key, e);
      }
      if (c.failure === undefined) e.failures = 0;
      else if (++e.failures < FAILING_AFTER) return;
      const status = c.failure === undefined ? 'verified' : 'failing';
      // The row already says it: nothing to write, and an older wish is void.
      if (c.status === status) {
        e.pending = undefined;
        return;
      }
      const at = new Date(c.at);
      const target: Target = { status, error: c.failure === undefined ? null : `${c.failure} at ${shownTime(at)}`, at };
      e.pending = target;
      schedule(e);
    },
    async settled() {
      while (inFlight.size > 0) await Promise.all([...inFlight]);
    },
    close() {
      closed = true;
      for (const k of [...entries.keys()]) {
        const e = entries.get(k);
        if (e?.timer !== undefined) {
          clearTimeout(e.timer);
          e.release?.();
        }
      }
      entries.clear();
    },
    counts,
  };
}
