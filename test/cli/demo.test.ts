/** `npm run demo` works on a fresh machine: it exits 0 and prints the facts it made. */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { ROOT, runProcess } from '../helpers/cli.ts';

it('runs the main job end to end and prints the facts', async () => {
  const env = { ...process.env };
  delete env.DATABASE_URL;
  delete env.REDIS_URL;
  const r = await runProcess(process.execPath, ['scripts/demo.ts'], ROOT, env);
  assert.equal(r.code, 0, r.stdout + r.stderr);
  assert.match(r.stdout, /evt_1: 202 \{"status":"duplicate"\}/);
  assert.match(r.stdout, /evt_3 \(through the relay, no bearer token\): 202 \{"status":"accepted"/);
  assert.match(r.stdout, /\(evt_4\): failed - Step store failed: .*data\/amount/);
  assert.match(r.stdout, /latest: 2 facts\n\s+A-101 .*\n\s+A-100 .*"status":"shipped"/);
  assert.match(r.stdout, /timeline: 3 facts/);
  assert.match(r.stdout, /evt_4 has total "lots", not a number: its run fails on purpose/);
  assert.match(r.stdout, /The run of evt_4 failed as intended.*\nNext: the README's "Your first task".*docs\/workflows\.md/);
});
