/** The sweep's schedule: SWEEP_CRON read as a 5-field cron expression in UTC, and timers that never overflow. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { nextRunAfter, startScheduler } from '../../src/maintenance/scheduler.ts';
import { MAX_TIMER_MS, timerDelay } from '../../src/datetime.ts';
import { writeFacts } from '../../src/facts/write.ts';
import { seedTenant, startApp } from '../helpers/app.ts';
import { createModel, daysAgo, factCount } from '../facts/helpers.ts';

const at = (iso: string) => new Date(iso);
const next = (cron: string, from: string) => nextRunAfter(cron, at(from)).toISOString();

test('the default schedule runs at 03:00 UTC: later the same day, or the next day once 03:00 has come', () => {
  assert.equal(next('0 3 * * *', '2026-11-22T02:59:00.000Z'), '2026-11-22T03:00:00.000Z');
  assert.equal(next('0 3 * * *', '2026-11-22T02:59:59.999Z'), '2026-11-22T03:00:00.000Z');
  assert.equal(next('0 3 * * *', '2026-11-22T03:00:00.000Z'), '2026-11-23T03:00:00.000Z', 'a run that just started does not run again');
  assert.equal(next('0 3 * * *', '2026-11-22T03:00:00.500Z'), '2026-11-23T03:00:00.000Z');
  assert.equal(next('0 3 * * *', '2026-12-31T12:00:00.000Z'), '2027-01-01T03:00:00.000Z');
});

test('steps, weekdays and months are those of cron, evaluated in UTC', () => {
  assert.equal(next('*/15 * * * *', '2026-11-22T10:07:00.000Z'), '2026-11-22T10:15:00.000Z');
  assert.equal(next('*/15 * * * *', '2026-11-22T10:45:00.000Z'), '2026-11-22T11:00:00.000Z');
  // 2026-11-22 is a Sunday: the next Monday is the 23rd.
  assert.equal(next('0 3 * * 1', '2026-11-22T04:00:00.000Z'), '2026-11-23T03:00:00.000Z');
  assert.equal(next('30 2 1 */3 *', '2026-11-22T00:00:00.000Z'), '2027-01-01T02:30:00.000Z');
});

test('a far run is waited for in steps a timer can take; a due one at once', () => {
  const now = at('2026-11-22T00:00:00.000Z');
  const yearly = nextRunAfter('0 0 1 1 *', now);
  assert.equal(yearly.toISOString(), '2027-01-01T00:00:00.000Z');
  assert.equal(timerDelay(yearly, now), MAX_TIMER_MS, 'about 40 days away: capped at the timer maximum');
  assert.equal(timerDelay(at('2026-11-22T00:00:01.500Z'), now), 1500);
  assert.equal(timerDelay(at('2026-11-21T23:59:59.000Z'), now), 0, 'overdue: now');
});

test('the scheduler sweeps when the schedule comes due, arms the next run, and stops', { timeout: 60_000 }, async (ctx) => {
  const t = await startApp({ SWEEP_CRON: '0 3 * * *' });
  try {
    const tenant = await seedTenant(t.deps);
    const m = await createModel(t.deps.db, tenant, [{ name: 'k', type: 'string', is_primary_key: true }], { retentionDays: 7 });
    const scope = { organizationId: tenant.organizationId, workspaceId: tenant.workspaceId };
    const expired = () => writeFacts(t.deps.db, scope, m, [{ observed_at: daysAgo(9), data: { k: randomUUID() } }]);
    await expired();
    const sweeps: unknown[] = [];
    const log = Object.create(t.deps.log, { info: { value: (o: unknown) => sweeps.push(o) } }) as typeof t.deps.log;
    // Real I/O runs on; only the scheduler's clock and timers are the test's.
    const settle = async (want: number) => {
      for (let i = 0; i < 100_000 && sweeps.length < want; i++) await new Promise((r) => setImmediate(r));
    };

    // One second before the next 03:00: the sweep's cutoff is read from that clock too.
    ctx.mock.timers.enable({ apis: ['setTimeout', 'Date'], now: nextRunAfter('0 3 * * *', new Date()).getTime() - 1000 });
    const scheduler = startScheduler({ ...t.deps, log });
    ctx.mock.timers.tick(999);
    await settle(1);
    assert.equal(sweeps.length, 0, 'not before 03:00');
    ctx.mock.timers.tick(1);
    await settle(1);
    assert.deepEqual(sweeps, [{ sweep: { idempotency_keys_deleted: 0, facts_deleted: 1, delivery_guards_deleted: 0, workflow_runs_deleted: 0 } }]);
    assert.equal(await factCount(t.deps.db, m.id), 0);

    // The next run is the next night's.
    await expired();
    ctx.mock.timers.tick(24 * 3_600_000 - 1);
    await settle(2);
    assert.equal(sweeps.length, 1);
    ctx.mock.timers.tick(1);
    await settle(2);
    assert.equal(sweeps.length, 2);
    assert.equal(await factCount(t.deps.db, m.id), 0);

    await scheduler.stop();
    await expired();
    ctx.mock.timers.tick(24 * 3_600_000);
    await settle(3);
    assert.equal(sweeps.length, 2, 'no run after stop()');
  } finally {
    ctx.mock.timers.reset();
    await t.close();
  }
});
