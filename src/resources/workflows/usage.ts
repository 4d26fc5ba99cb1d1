/** The 409 of a DELETE refused because saved workflows still use what it would delete. */
import { AppError } from '../../errors.ts';
import type { Db } from '../../db/connect.ts';
import { workflowsUsing, type Use } from './usage.sql.ts';

/**
 * 409 `conflict` naming the workflows (name and id) that still use it, e.g.
 * `This external_connector is used by the workflows "Orders" (0190...), "Refunds" (0190...):
 * delete them or save them without it first`.
 */
export async function refuseIfUsed(db: Db, workspaceId: string, what: string, use: Use): Promise<void> {
  const { named, total } = await workflowsUsing(db, workspaceId, use);
  if (total === 0) return;
  const names = named.map((w) => `${JSON.stringify(w.name)} (${w.id})`).join(', ');
  const more = total > named.length ? ` and ${total - named.length} more` : '';
  throw new AppError(
    'conflict',
    `This ${what} is used by the ${total === 1 ? 'workflow' : 'workflows'} ${names}${more}: delete ${total === 1 ? 'it' : 'them'} or save ${total === 1 ? 'it' : 'them'} without it first (every saved version counts)`,
  );
}
