import type { Principal } from '../../auth/principal.ts';
import type { Db } from '../../db/connect.ts';
import { AppError } from '../../errors.ts';
import { deleteWidget } from './dashboard-widgets.sql.ts';

/** DELETE a widget placement: nothing else refers to one. */
export async function deleteDashboardWidget(db: Db, principal: Principal, id: string): Promise<void> {
  if (!(await deleteWidget(db, principal.workspaceId, id))) throw new AppError('not_found', 'No dashboard_widget with this id');
}
