/**
 * Builds the browser console (console/) into dist/console: one JavaScript and one CSS file
 * with content hashes, and index.html naming them; code a page imports lazily (the workflow
 * editor: CodeMirror and the YAML reader; the charts: uPlot) is split into chunks loaded only there. `npm install` runs it (the prepare
 * script), so the README's two commands stay the whole setup; `npm run build:console` again
 * after editing console/. Prints the gzipped size of the initial JavaScript, which the
 * console's budget (150 KB) is measured on.
 */
import { build } from 'esbuild';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { gzipSync } from 'node:zlib';

const root = path.resolve(import.meta.dirname, '..');
const out = path.join(root, 'dist', 'console');

/** The files the build reads: the console, the SDK it bundles, Preact's version and this script. */
function inputsHash(): string {
  const hash = createHash('sha256');
  const walk = (dir: string) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else hash.update(`${path.relative(root, p)}\0`).update(fs.readFileSync(p));
    }
  };
  walk(path.join(root, 'console'));
  walk(path.join(root, 'packages', 'client', 'src'));
  for (const pkg of [
    'preact',
    'yaml',
    '@codemirror/state',
    '@codemirror/view',
    '@codemirror/language',
    '@codemirror/lang-yaml',
    '@codemirror/lint',
    '@codemirror/commands',
    'uplot',
  ])
    hash.update(fs.readFileSync(path.join(root, 'node_modules', pkg, 'package.json')));
  walk(path.join(root, 'src', 'workflows'));
  hash.update(fs.readFileSync(import.meta.filename));
  return hash.digest('hex');
}

/**
 * The SDK's own sources (`tributary-source` in packages/client/package.json), so the console
 * needs no SDK build; `module` is esbuild's default condition, which naming conditions drops.
 */
export const CONSOLE_CONDITIONS = ['tributary-source', 'module'];

interface Built {
  js: string;
  css: string;
  jsGzipBytes: number;
}

/**
 * Builds into a fresh folder and swaps it in, and does nothing when the inputs are those of
 * the build in place: a server starting meanwhile (a test, `npx tributary` installing this
 * package into its cache and running prepare again) never finds the console half-written.
 */
export async function buildConsole(opts: { quiet?: boolean } = {}): Promise<Built> {
  const inputs = inputsHash();
  const stamp = path.join(out, 'build.json');
  if (fs.existsSync(stamp)) {
    const prior = JSON.parse(fs.readFileSync(stamp, 'utf8')) as Built & { inputs: string };
    if (prior.inputs === inputs && fs.existsSync(path.join(out, 'assets', prior.js))) {
      if (!opts.quiet) console.log(`console up to date: dist/console/assets/${prior.js}`);
      return { js: prior.js, css: prior.css, jsGzipBytes: prior.jsGzipBytes };
    }
  }
  const next = `${out}.next-${process.pid}`;
  fs.rmSync(next, { recursive: true, force: true });
  const result = await build({
    entryPoints: [path.join(root, 'console', 'src', 'main.tsx')],
    bundle: true,
    minify: true,
    format: 'esm',
    splitting: true,
    target: 'es2022',
    platform: 'browser',
    conditions: CONSOLE_CONDITIONS,
    // This checkout's SDK, wherever node_modules links the workspace package to.
    alias: { '@tributary/client': path.join(root, 'packages', 'client', 'src', 'index.ts') },
    jsx: 'automatic',
    jsxImportSource: 'preact',
    outdir: path.join(next, 'assets'),
    entryNames: '[name]-[hash]',
    chunkNames: 'chunk-[hash]',
    metafile: true,
    legalComments: 'none',
    logLevel: 'warning',
  });
  const outputs = Object.keys(result.metafile.outputs).map((f) => path.basename(f));
  // The entry's own file is the initial JavaScript; chunks load when a page imports them.
  const js = Object.entries(result.metafile.outputs)
    .filter(([, o]) => o.entryPoint !== undefined)
    .map(([f]) => path.basename(f))
    .find((f) => f.endsWith('.js'));
  const css = outputs.find((f) => f.endsWith('.css'));
  if (!js || !css) throw new Error(`console build made ${outputs.join(', ')}: expected an entry .js and one .css`);
  const html = fs
    .readFileSync(path.join(root, 'console', 'index.html'), 'utf8')
    .replace('%JS%', `assets/${js}`)
    .replace('%CSS%', `assets/${css}`);
  fs.writeFileSync(path.join(next, 'index.html'), html);
  const jsGzipBytes = gzipSync(fs.readFileSync(path.join(next, 'assets', js))).length;
  fs.writeFileSync(path.join(next, 'build.json'), `${JSON.stringify({ inputs, js, css, jsGzipBytes }, null, 2)}\n`);
  const old = `${out}.old-${process.pid}`;
  if (fs.existsSync(out)) fs.renameSync(out, old);
  fs.renameSync(next, out);
  fs.rmSync(old, { recursive: true, force: true });
  if (!opts.quiet) console.log(`console built: dist/console/assets/${js} (${(jsGzipBytes / 1024).toFixed(1)} KB gzipped), ${css}`);
  return { js, css, jsGzipBytes };
}

if (import.meta.main) await buildConsole();
