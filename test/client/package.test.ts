/**
 * @tributary/client as a user gets it: `npm pack` (which builds dist/ on prepack), the
 * tarball installed offline into an empty project outside the repository, then the README's
 * example run there against a real server, on the machine's own Node (20 here), on the
 * pinned one, and on SDK_TEST_NODE's when set. The installed package must be JavaScript and
 * .d.ts only, type-check for a TypeScript user, and bundle for a browser without a Node module.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { build } from 'esbuild';
import { createClient } from '../../packages/client/src/index.ts';
import { jsonApi, seedTenant, startApp, tokenFor, type TestApp } from '../helpers/app.ts';
import { ROOT, runProcess } from '../helpers/cli.ts';
import { CONSOLE_CONDITIONS } from '../../scripts/build-console.ts';
import { createModel, saveOk, type Flow } from '../webhooks/helpers.ts';

const PKG = path.join(ROOT, 'packages', 'client');
const README = fs.readFileSync(path.join(PKG, 'README.md'), 'utf8');
/** The README's first ```js block: the example, exactly as documented. */
const EXAMPLE = /^```js\n([\s\S]*?)^```$/m.exec(README)?.[1];

/** The machine's own Node when it is another one than the pinned Node running this test. */
const SYSTEM_NODE = ['/usr/bin/node', '/usr/local/bin/node'].find((p) => fs.existsSync(p) && fs.realpathSync(p) !== fs.realpathSync(process.execPath));

/** npm and the tools it runs, without the settings of a server or of this test run. */
function userEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env))
    if (!/^(TRIBUTARY_|DATABASE_URL$|REDIS_URL$|PORT$|DATA_DIR$|NODE_OPTIONS$|NODE_TEST_CONTEXT$)/.test(k)) env[k] = v;
  return { ...env, ...extra };
}

async function run(command: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = userEnv()) {
  const r = await runProcess(command, args, cwd, env);
  assert.equal(r.code, 0, `${command} ${args.join(' ')} failed in ${cwd}:\n${r.stderr}\n${r.stdout}`);
  return r;
}

const work = fs.mkdtempSync(path.join(os.tmpdir(), 'tributary-sdk-'));
const project = path.join(work, 'project');
const installed = path.join(project, 'node_modules', '@tributary', 'client');
after(() => fs.rmSync(work, { recursive: true, force: true }));

before(async () => {
  assert.ok(path.relative(ROOT, work).startsWith('..'), 'the project is outside the repository');
  const { version } = JSON.parse(fs.readFileSync(path.join(PKG, 'package.json'), 'utf8')) as { version: string };
  await run('npm', ['pack', '--pack-destination', work, '--offline', '--no-audit', '--no-fund'], PKG);
  const tarball = path.join(work, `tributary-client-${version}.tgz`);
  assert.ok(fs.existsSync(tarball), `npm pack wrote ${fs.readdirSync(work).join(', ')}`);
  fs.mkdirSync(project);
  fs.writeFileSync(path.join(project, 'package.json'), `${JSON.stringify({ name: 'sdk-user', private: true, type: 'module' }, null, 2)}\n`);
  // The package has no dependencies: the install needs no registry.
  await run('npm', ['install', tarball, '--offline', '--no-audit', '--no-fund', '--ignore-scripts'], project);
});

function filesOf(dir: string): string[] {
  return fs
    .readdirSync(dir, { withFileTypes: true })
    .flatMap((e) => (e.isDirectory() ? filesOf(path.join(dir, e.name)).map((f) => `${e.name}/${f}`) : [e.name]));
}

describe('the installed package', () => {
  it('is compiled JavaScript, .d.ts, README and CHANGELOG, with no dependency and no TypeScript source', () => {
    const files = filesOf(installed).sort();
    assert.ok(files.includes('dist/index.js') && files.includes('dist/index.d.ts') && files.includes('dist/schema.d.ts'), files.join(', '));
    assert.deepEqual(
      files.filter((f) => !/^dist\/[\w-]+\.(js|d\.ts)$/.test(f)),
      ['CHANGELOG.md', 'README.md', 'package.json'],
    );
    const pkg = JSON.parse(fs.readFileSync(path.join(installed, 'package.json'), 'utf8')) as Record<string, unknown>;
    assert.equal(pkg.dependencies, undefined);
    assert.deepEqual(pkg.engines, { node: '>=20' });
    assert.match(String(pkg.version), /^0\.\d+\.\d+$/);
    assert.ok(fs.readFileSync(path.join(installed, 'CHANGELOG.md'), 'utf8').includes(`## [${String(pkg.version)}]`), 'the CHANGELOG has this version');
    for (const f of files.filter((x) => x.endsWith('.js') || x.endsWith('.d.ts'))) {
      const text = fs.readFileSync(path.join(installed, f), 'utf8');
      assert.doesNotMatch(text, /from\s*['"]\.{1,2}\/[^'"]*\.ts['"]|import\(\s*['"]\.{1,2}\/[^'"]*\.ts['"]/, `${f} imports a TypeScript file`);
    }
  });

  it('type-checks in a strict TypeScript project with the library checks on', async () => {
    fs.writeFileSync(
      path.join(project, 'typed.ts'),
      [
        "import { createClient, TributaryError, type FactGroup, type ResourceOf } from '@tributary/client';",
        "const c = createClient({ baseUrl: 'http://127.0.0.1:1', clientId: 'tbci_x', clientSecret: 'tbcs_x' });",
        'export async function names(): Promise<string[]> {',
        "  const runs: ResourceOf<'workflow_runs'>[] = (await c.list('workflow_runs', { filter: { status: 'failed' } })).data;",
        "  const e = new TributaryError({ status: 401, code: 'Unauthorized', detail: 'Unauthorized' });",
        '  return [...runs.map((r) => r.id), e.detail ?? ""];',
        '}',
        '// @ts-expect-error: not a collection',
        "c.list('nope');",
        'export async function facts(): Promise<number> {',
        '  let n = 0;',
        "  for await (const page of c.factPages({ dataModelSlug: 'orders', mode: 'timeline', pageSize: 100 })) n += page.length;",
        "  for await (const f of c.facts({ dataModelSlug: 'orders', filters: [{ field: 'status', op: 'eq', value: 'open' }] })) n += f.entityId === null ? 0 : 1;",
        '  return n;',
        '}',
        'export async function aggregate(): Promise<Array<number | null>> {',
        "  const { factAggregate } = await c.factAggregate('query { ... }', { dataModelSlug: 'orders', groupBy: ['status'], bucket: 'day', measures: [{ op: 'sum', field: 'amount' }] });",
        '  const group: FactGroup | undefined = factAggregate?.groups[0];',
        '  return [group?.keys[0]?.number ?? null, ...(group?.values.map((v) => v.value) ?? [])];',
        '}',
        '// @ts-expect-error: not a measure',
        "c.factAggregate('query { ... }', { dataModelSlug: 'orders', measures: [{ op: 'median' }] });",
        "// @ts-expect-error: pages are a factQuery's own",
        "c.facts({ dataModelSlug: 'orders', offset: 10 });",
        '',
      ].join('\n'),
    );
    const tsconfig = {
      compilerOptions: {
        target: 'ES2022',
        lib: ['ES2022', 'DOM'],
        module: 'NodeNext',
        moduleResolution: 'NodeNext',
        strict: true,
        noEmit: true,
        skipLibCheck: false,
        types: [],
      },
      files: ['typed.ts'],
    };
    fs.writeFileSync(path.join(project, 'tsconfig.json'), JSON.stringify(tsconfig));
    await run(process.execPath, [path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', project], project);
  });

  it('bundles for a browser without a Node module, and the bundle loads', async () => {
    const result = await build({
      stdin: { contents: "export * from '@tributary/client';", resolveDir: project, loader: 'js' },
      absWorkingDir: project,
      bundle: true,
      write: false,
      format: 'esm',
      platform: 'browser',
      target: 'es2022',
      logLevel: 'silent',
      metafile: true,
    });
    const inputs = Object.keys(result.metafile.inputs).filter((f) => f !== '<stdin>');
    assert.ok(inputs.length >= 5 && inputs.every((f) => f.startsWith('node_modules/@tributary/client/dist/')), inputs.join(', '));
    const code = result.outputFiles[0]!.text;
    assert.doesNotMatch(code, /['"]node:|\brequire\(/);
    const sdk = (await import(`data:text/javascript;base64,${Buffer.from(code).toString('base64')}`)) as typeof import('../../packages/client/src/index.ts');
    assert.equal(typeof sdk.createClient, 'function');
    assert.equal(new sdk.TributaryError({ status: 401, code: 'Unauthorized', detail: 'Unauthorized' }).message, 'HTTP 401 Unauthorized: Unauthorized');
  });
});

describe('in the repository', () => {
  it('the console bundles the SDK from its sources and the CLI imports them: neither needs dist/', async () => {
    // As the console finds the package: node_modules/@tributary/client, a link to packages/client.
    const dir = fs.mkdtempSync(path.join(work, 'console-'));
    fs.mkdirSync(path.join(dir, 'node_modules', '@tributary'), { recursive: true });
    fs.symlinkSync(PKG, path.join(dir, 'node_modules', '@tributary', 'client'));
    const result = await build({
      stdin: { contents: "export { createClient } from '@tributary/client';", resolveDir: dir, loader: 'js' },
      absWorkingDir: ROOT,
      bundle: true,
      write: false,
      format: 'esm',
      platform: 'browser',
      conditions: CONSOLE_CONDITIONS,
      logLevel: 'silent',
      metafile: true,
    });
    const inputs = Object.keys(result.metafile.inputs).filter((f) => f !== '<stdin>');
    assert.ok(inputs.length >= 5 && inputs.every((f) => f.startsWith('packages/client/src/') && f.endsWith('.ts')), inputs.join(', '));
    const cli = fs.readFileSync(path.join(ROOT, 'src', 'cli', 'api-client.ts'), 'utf8');
    assert.match(cli, /from '\.\.\/\.\.\/packages\/client\/src\/index\.ts'/);
  });
});

/** A workspace with an `orders` model, a workflow storing its deliveries, one fact and one failed run. */
async function workspace(t: TestApp) {
  const tenant = await seedTenant(t.deps);
  const bearer = await tokenFor(t, tenant);
  const f = { t, tenant, bearer, api: jsonApi(t, bearer) } as Flow;
  await createModel(f, 'orders', [
    { name: 'order_id', type: 'string' },
    { name: 'amount', type: 'float', is_required: true },
  ]);
  const saved = await saveOk(f, {
    step_params: [{ key: 'store', type: 'write_fact', config: { data_model_slug: 'orders', mapping: { order_id: 'payload.id', amount: 'payload.amount' } } }],
  });
  const token = saved.tokens.hook!;
  const c = createClient({ baseUrl: t.url, clientId: tenant.clientId, clientSecret: tenant.clientSecret });
  const settled = async (deliveryId: string, body: unknown) => {
    const sent = await c.sendWebhook(token, body, { deliveryId });
    assert.ok(sent.status === 'accepted');
    for (let i = 0; ; i++) {
      const status = (await c.get('workflow_runs', sent.workflow_run_id)).data.attributes?.status;
      if (status === 'succeeded' || status === 'failed') return { id: sent.workflow_run_id, status };
      assert.ok(i < 3000, `run ${sent.workflow_run_id} still ${status}`);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  };
  assert.equal((await settled('order-o-1', { id: 'o-1', amount: 12.5 })).status, 'succeeded');
  // No amount, which the model requires: the run fails.
  const failed = await settled('order-o-bad', { id: 'o-bad' });
  assert.equal(failed.status, 'failed');
  return { tenant, token, failedRunId: failed.id, c };
}

describe("the README's example, installed from the tarball", () => {
  let t: TestApp;
  before(async () => {
    t = await startApp({ RUN_RETRY_SCHEDULE: '20ms' }, { worker: true });
  });
  after(() => t?.close());

  const nodes: Array<[string, string | undefined]> = [
    ['the pinned Node', process.execPath],
    ["the machine's own Node", SYSTEM_NODE],
  ];
  // One more by hand, never downloaded by the test: SDK_TEST_NODE=/path/to/node22/bin/node.
  if (process.env.SDK_TEST_NODE) nodes.push([`SDK_TEST_NODE (${process.env.SDK_TEST_NODE})`, process.env.SDK_TEST_NODE]);
  for (const [name, node] of nodes) {
    it(`runs on ${name} and prints what it did`, { skip: node === undefined ? 'no other Node on this machine' : false, timeout: 120_000 }, async () => {
      assert.ok(EXAMPLE !== undefined && EXAMPLE.includes("from '@tributary/client'"), 'the README starts with its example');
      const w = await workspace(t);
      fs.writeFileSync(path.join(project, 'example.js'), EXAMPLE);
      const version = (await run(node!, ['--version'], project)).stdout.trim();
      const env = userEnv({
        TRIBUTARY_URL: t.url,
        TRIBUTARY_CLIENT_ID: w.tenant.clientId,
        TRIBUTARY_CLIENT_SECRET: w.tenant.clientSecret,
        TRIBUTARY_TRIGGER_TOKEN: w.token,
      });
      const r = await run(node!, ['example.js'], project, env);
      assert.equal(r.stderr, '', `${version} wrote to stderr`);
      const lines = r.stdout.trimEnd().split('\n');
      assert.equal(lines.length, 5, r.stdout);
      const replayed = /^replayed (\S+) as (\S+)$/.exec(lines[0]!);
      assert.ok(replayed, lines[0]);
      assert.equal(replayed[1], w.failedRunId);
      assert.deepEqual(lines.slice(1), ['orders: o-1 (1 in all)', 'order facts: 1', 'count 1, sum_amount 12.5', 'webhook accepted']);
      // What it printed is what the server holds: the replay and the delivery are runs.
      const again = (await w.c.get('workflow_runs', replayed[2]!)).data;
      assert.equal(again.id, replayed[2]);
      const runs = (await w.c.list('workflow_runs')).data.map((x) => x.id);
      assert.equal(runs.length, 4, `two deliveries of the setup, the replay and the example's delivery on ${version}`);
    });
  }
});
