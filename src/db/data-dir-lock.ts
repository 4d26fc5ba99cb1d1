/**
 * One process per PGlite data directory. PGlite has no lock of its own: two processes on
 * one directory both acknowledge writes and each overwrites the other's files, so the
 * writes of one are lost. The lock is a file created atomically (link(2) of a finished
 * temporary file, so no process ever reads a half-written lock) naming its holder; a lock
 * whose holder is gone is taken over.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export const LOCK_FILE = 'lock';

export class DataDirInUseError extends Error {
  constructor(dataDir: string, pid: number) {
    super(`DATA_DIR ${dataDir} is in use by process ${pid}; stop that process or set another DATA_DIR`);
    this.name = 'DataDirInUseError';
  }
}

interface Holder {
  pid: number;
  host: string;
  /** The holder's start time as the kernel counts it (Linux), so a reused pid is not taken for the holder. */
  started: string | null;
}

/** Directories this process holds: a second open from the same process is refused too. */
const held = new Set<string>();

function startTimeOf(pid: number): string | null {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Field 22; the command name (field 2) may hold spaces and parentheses, so count after its closing one.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null;
  } catch {
    return null;
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: alive, owned by another user.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function readHolder(file: string): Holder | undefined {
  try {
    const h = JSON.parse(fs.readFileSync(file, 'utf8')) as Partial<Holder>;
    return Number.isSafeInteger(h.pid) && (h.pid as number) > 0 ? { pid: h.pid as number, host: String(h.host ?? ''), started: h.started ?? null } : undefined;
  } catch {
    return undefined;
  }
}

/** Whether the recorded holder still runs. A lock from another host is trusted: its pid cannot be checked here. */
function holderRuns(h: Holder): boolean {
  if (h.host !== os.hostname()) return true;
  // Our own pid in a lock this process does not hold: a former process had it (a restarted container is pid 1 again).
  if (h.pid === process.pid) return false;
  if (!isAlive(h.pid)) return false;
  const started = startTimeOf(h.pid);
  return h.started === null || started === null || started === h.started;
}

/**
 * Takes the lock of `dataDir` or throws DataDirInUseError. Returns the release function,
 * which also runs when the process exits.
 */
export function lockDataDir(dataDir: string): () => void {
  const dir = path.resolve(dataDir);
  if (held.has(dir)) throw new DataDirInUseError(dataDir, process.pid);
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const file = path.join(dir, LOCK_FILE);
  const content = JSON.stringify({ pid: process.pid, host: os.hostname(), started: startTimeOf(process.pid) } satisfies Holder);
  const tmp = path.join(dir, `${LOCK_FILE}.${process.pid}.tmp`);
  fs.writeFileSync(tmp, content, { mode: 0o600 });
  try {
    for (let attempt = 0; ; attempt++) {
      try {
        fs.linkSync(tmp, file);
        break;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      }
      const holder = readHolder(file);
      if (holder && holderRuns(holder)) throw new DataDirInUseError(dataDir, holder.pid);
      if (attempt >= 3) throw new DataDirInUseError(dataDir, holder?.pid ?? 0);
      // Stale (or unreadable: a lock is only ever linked in whole). Moved aside under a name
      // of our own, so of two processes taking over the same stale lock only one removes it.
      const aside = path.join(dir, `${LOCK_FILE}.${process.pid}.stale`);
      try {
        fs.renameSync(file, aside);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue;
        throw err;
      }
      const moved = readHolder(aside);
      if (moved && holderRuns(moved)) {
        // Another process took over between our read and our rename: give its lock back.
        fs.renameSync(aside, file);
        throw new DataDirInUseError(dataDir, moved.pid);
      }
      fs.rmSync(aside, { force: true });
    }
  } finally {
    fs.rmSync(tmp, { force: true });
  }
  held.add(dir);
  let released = false;
  const release = () => {
    if (released) return;
    released = true;
    held.delete(dir);
    process.off('exit', release);
    try {
      // Only our own lock: never one a later process took over.
      if (fs.readFileSync(file, 'utf8') === content) fs.rmSync(file, { force: true });
    } catch {
      // already gone
    }
  };
  process.on('exit', release);
  return release;
}
