/** The relay's token source: one exchange at a time, renewal before expiry, a pause after a failure, renew(stale). */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { tokenSource, type Exchanged } from '../../src/relay/token.ts';

function exchanger() {
  const calls: Array<{ resolve: (e: Exchanged) => void; reject: (err: Error) => void }> = [];
  const exchange = () => new Promise<Exchanged>((resolve, reject) => calls.push({ resolve, reject }));
  return { calls, exchange };
}
const tick = () => new Promise((resolve) => setImmediate(resolve));

it('waiters share one exchange; renewal runs once in the background; expiry makes them wait again', async () => {
  let now = 0;
  const x = exchanger();
  const src = tokenSource(x.exchange, () => now);
  const waiting = Array.from({ length: 50 }, () => src.get());
  await tick();
  assert.equal(x.calls.length, 1);
  x.calls[0]!.resolve({ token: 't1', expiresInSeconds: 900 });
  assert.deepEqual(new Set(await Promise.all(waiting)), new Set(['t1']));
  now = 700_000; // before the renewal point (80% of 900 s)
  assert.equal(await src.get(), 't1');
  assert.equal(x.calls.length, 1);
  now = 800_000; // past it, before expiry: the old token still serves while one renewal runs
  assert.deepEqual(await Promise.all(Array.from({ length: 50 }, () => src.get())), Array(50).fill('t1'));
  assert.equal(x.calls.length, 2);
  x.calls[1]!.resolve({ token: 't2', expiresInSeconds: 900 });
  await tick();
  assert.equal(await src.get(), 't2');
  now = 800_000 + 901_000; // expired: everyone waits for one exchange
  const late = Array.from({ length: 20 }, () => src.get());
  await tick();
  assert.equal(x.calls.length, 3);
  x.calls[2]!.resolve({ token: 't3', expiresInSeconds: 900 });
  assert.deepEqual(new Set(await Promise.all(late)), new Set(['t3']));
  assert.equal(src.exchanges, 3);
});

it('renew(stale): one exchange for every holder of the refused token; a holder of an older one gets the current', async () => {
  const x = exchanger();
  const src = tokenSource(x.exchange, () => 0);
  const first = src.get();
  await tick();
  x.calls[0]!.resolve({ token: 't1', expiresInSeconds: 900 });
  assert.equal(await first, 't1');
  const renewed = Array.from({ length: 10 }, () => src.renew('t1'));
  await tick();
  assert.equal(x.calls.length, 2);
  x.calls[1]!.resolve({ token: 't2', expiresInSeconds: 900 });
  assert.deepEqual(new Set(await Promise.all(renewed)), new Set(['t2']));
  assert.equal(await src.renew('t1'), 't2');
  assert.equal(x.calls.length, 2);
});

it('a failed exchange fails its waiters and the next second of deliveries at once, then is tried again', async () => {
  let now = 0;
  const x = exchanger();
  const src = tokenSource(x.exchange, () => now);
  const a = src.get();
  await tick();
  x.calls[0]!.reject(new Error('refused'));
  await assert.rejects(a, /refused/);
  await assert.rejects(src.get(), /refused/);
  assert.equal(x.calls.length, 1);
  now = 1001;
  const b = src.get();
  await tick();
  assert.equal(x.calls.length, 2);
  x.calls[1]!.resolve({ token: 't1', expiresInSeconds: 60 });
  assert.equal(await b, 't1');
});
