/**
 * The domain never imports a surface (docs/architecture.md, "Layers").
 *
 * A surface module is one that answers requests of one surface: everything under
 * src/http/, src/graphql/ and src/token/, src/webhooks/surface.ts, and src/admin/ except
 * its services (service.ts, admin.sql.ts, bootstrap.ts). A domain module is everything
 * under src/facts/, src/resources/, src/providers/, src/workflows/, src/runs/, src/worker/, src/steps/, src/expressions/,
 * src/connectors/, src/openapi/, src/auth/, src/db/, src/triggers/, src/quotas/, src/webhooks/ other than surface.ts,
 * those admin services, and the files directly in src/ other than the entry points
 * (main.ts, server.ts, app.ts). A domain module imports no surface module, with `import`,
 * `import type`, `export ... from` or `import()` alike. src/cli/ and src/maintenance/ are
 * neither: they run the service and sweep the stores of both. src/cli imports the SDK
 * (packages/client/src) by path; that is another package, not a module of src/.
 *
 * And the modules of src/ import each other in no circle.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const SRC = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'src');

const SURFACE = [/^http\//, /^graphql\//, /^token\//, /^webhooks\/surface\.ts$/, /^admin\/(?!(service|admin\.sql|bootstrap)\.ts$)/];
const DOMAIN = [
  /^facts\//,
  /^resources\//,
  /^providers\//,
  /^workflows\//,
  /^runs\//,
  /^worker\//,
  /^steps\//,
  /^expressions\//,
  /^connectors\//,
  /^openapi\//,
  /^auth\//,
  /^db\//,
  /^triggers\//,
  /^quotas\//,
  /^webhooks\/(?!surface\.ts$)/,
  /^admin\/(service|admin\.sql|bootstrap)\.ts$/,
  /^(?!(main|server|app)\.ts$)[^/]+\.ts$/,
];

const isSurface = (file: string) => SURFACE.some((re) => re.test(file));
const isDomain = (file: string) => !isSurface(file) && DOMAIN.some((re) => re.test(file));

function sourceFiles(dir: string, under = ''): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const rel = under === '' ? e.name : `${under}/${e.name}`;
    if (e.isDirectory()) return sourceFiles(path.join(dir, e.name), rel);
    return e.name.endsWith('.ts') && !e.name.endsWith('.d.ts') ? [rel] : [];
  });
}

// Static imports and re-exports (over several lines too), side-effect imports and import().
const IMPORT = /^\s*(?:import|export)\b[^;'"]*?\bfrom\s*'([^']+)'|^\s*import\s*'([^']+)'|\bimport\(\s*'([^']+)'\s*\)/gm;

/** Where src/cli imports the SDK from (by path): packages/client, not a module of src/. */
const SDK_SOURCES = '../packages/client/src/';

/** The files of src/ a file imports, as paths under src/. */
function importsOf(file: string): string[] {
  const text = fs.readFileSync(path.join(SRC, file), 'utf8');
  const out: string[] = [];
  for (const m of text.matchAll(IMPORT)) {
    const spec = m[1] ?? m[2] ?? m[3]!;
    if (!spec.startsWith('.')) continue;
    const target = path.posix.normalize(path.posix.join(path.posix.dirname(file), spec));
    if (target.startsWith(SDK_SOURCES)) continue;
    out.push(target);
  }
  return out;
}

const FILES = sourceFiles(SRC);
const GRAPH = new Map(FILES.map((f) => [f, importsOf(f)]));

describe('layers', () => {
  it('reads the imports of every module (the rule is not vacuous)', () => {
    for (const surface of ['http/surface.ts', 'graphql/surface.ts', 'token/surface.ts', 'webhooks/surface.ts', 'admin/surface.ts']) {
      assert.ok(GRAPH.has(surface) && isSurface(surface), `${surface} is a surface module`);
    }
    for (const domain of [
      'facts/write.ts',
      'resources/workflows/service.ts',
      'auth/principal.ts',
      'worker/execute.ts',
      'steps/write-fact.ts',
      'webhooks/webhooks.sql.ts',
      'deps.ts',
    ]) {
      assert.ok(GRAPH.has(domain) && isDomain(domain), `${domain} is a domain module`);
    }
    assert.ok(GRAPH.get('app.ts')!.includes('http/surface.ts'), 'app.ts imports http/surface.ts');
    for (const [file, imports] of GRAPH) {
      for (const target of imports) assert.ok(GRAPH.has(target), `${file} imports ${target}, which is not a module of src/`);
    }
  });

  it('the domain never imports a surface', () => {
    const wrong = [...GRAPH].filter(([file]) => isDomain(file)).flatMap(([file, imports]) => imports.filter(isSurface).map((target) => `${file} -> ${target}`));
    assert.deepEqual(wrong, [], 'domain modules that import a surface module');
  });

  it('no modules import each other in a circle', () => {
    const state = new Map<string, 'open' | 'done'>();
    const circles: string[] = [];
    const visit = (file: string, trail: string[]) => {
      if (state.get(file) === 'done') return;
      if (state.get(file) === 'open') {
        circles.push([...trail.slice(trail.indexOf(file)), file].join(' -> '));
        return;
      }
      state.set(file, 'open');
      for (const target of GRAPH.get(file) ?? []) visit(target, [...trail, file]);
      state.set(file, 'done');
    };
    for (const file of FILES) visit(file, []);
    assert.deepEqual(circles, []);
  });
});
