/** Replaying a run: a new run of the same workflow version with the same payload, linked by replay_of. */
import type { Principal } from '../../auth/principal.ts';
import type { Deps } from '../../deps.ts';
import { AppError } from '../../errors.ts';
import { isUuid, uuidv7 } from '../../ids.ts';
import { insertReplay } from './workflow-runs.sql.ts';

export async function replayRun(deps: Deps, principal: Principal, runId: string): Promise<Record<string, any>> {
  const row = isUuid(runId)
    ? await insertReplay(deps.db, principal.workspaceId, runId.toLowerCase(), uuidv7(), new Date(deps.clock()), deps.config.runMaxAttempts, deps.engine === 'postgres')
    : undefined;
  if (!row) throw new AppError('not_found', 'No workflow_run with this id');
  deps.queueSignal.wake();
  return row;
}
