/**
 * `npm install` on an older Node than the pinned one ends with one line saying what npm's
 * EBADENGINE warnings mean (scripts/node-pin.ts, run by the prepare script); on the pinned
 * Node it says nothing.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { ROOT, runProcess } from '../helpers/cli.ts';

const agent = (node: string) => `npm/11.19.1 node/${node} linux x64 workspaces/false`;

test('npm on Node 20: one line naming both Nodes', async () => {
  const r = await runProcess(process.execPath, ['scripts/node-pin.ts'], ROOT, { ...process.env, npm_config_user_agent: agent('v20.20.2') });
  assert.equal(r.code, 0, r.stderr);
  assert.equal(
    r.stdout,
    `Tributary runs on Node ${process.version}, installed as its "node" devDependency: npm start, npm test and npx tributary use it. ` +
      'npm itself runs on v20.20.2: its EBADENGINE warnings above do not apply to them.\n',
  );
  assert.equal(r.stderr, '');
});

test('npm on the pinned Node, or not run by npm: nothing', async () => {
  for (const env of [{ npm_config_user_agent: agent(process.version) }, { npm_config_user_agent: '' }]) {
    const r = await runProcess(process.execPath, ['scripts/node-pin.ts'], ROOT, { ...process.env, ...env });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout + r.stderr, '');
  }
});

test('the prepare script of npm install runs it, and the pin stays', () => {
  const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
    scripts: Record<string, string>;
    devDependencies: Record<string, string>;
  };
  assert.match(pkg.scripts.prepare!, /node scripts\/node-pin\.ts/);
  assert.match(pkg.devDependencies.node!, /^\^?24\./);
});
