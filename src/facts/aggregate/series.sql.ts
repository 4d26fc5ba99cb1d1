/**
 * factAggregate's `series`: the latest-state aggregate as of the end of each bucket of a window.
 * (Being built: see the series branch.)
 */
import type { Db } from '../../db/connect.ts';
import type { AggregatePlan, AggregateResult } from './plan-types.ts';

export async function runSeries(_db: Db, _p: AggregatePlan): Promise<AggregateResult> {
  throw new Error('series: not built yet');
}
