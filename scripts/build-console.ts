/**
 * Builds the browser console (console/) into dist/console: one JavaScript and one CSS file
 * with content hashes, and index.html naming them. `npm install` runs it (the prepare
 * script), so the README's two commands stay the whole setup; `npm run build:console` again
 * after editing console/. Prints the gzipped size of the initial JavaScript, which the
 * console's budget (150 KB) is measured on.
 */
import { build } from 'esbuild';
import fs from 'node:fs';
import path from 'node:path';
import { gzipSync } from 'node:zlib';

const root = path.resolve(import.meta.dirname, '..');
const out = path.join(root, 'dist', 'console');

export async function buildConsole(opts: { quiet?: boolean } = {}): Promise<{ js: string; css: string; jsGzipBytes: number }> {
  fs.rmSync(out, { recursive: true, force: true });
  const result = await build({
    entryPoints: [path.join(root, 'console', 'src', 'main.tsx')],
    bundle: true,
    minify: true,
    format: 'esm',
    target: 'es2022',
    platform: 'browser',
    jsx: 'automatic',
    jsxImportSource: 'preact',
    outdir: path.join(out, 'assets'),
    entryNames: '[name]-[hash]',
    metafile: true,
    legalComments: 'none',
    logLevel: 'warning',
  });
  const outputs = Object.keys(result.metafile.outputs).map((f) => path.basename(f));
  const js = outputs.find((f) => f.endsWith('.js'));
  const css = outputs.find((f) => f.endsWith('.css'));
  if (!js || !css) throw new Error(`console build made ${outputs.join(', ')}: expected one .js and one .css`);
  const html = fs
    .readFileSync(path.join(root, 'console', 'index.html'), 'utf8')
    .replace('%JS%', `assets/${js}`)
    .replace('%CSS%', `assets/${css}`);
  fs.writeFileSync(path.join(out, 'index.html'), html);
  const jsGzipBytes = gzipSync(fs.readFileSync(path.join(out, 'assets', js))).length;
  if (!opts.quiet) console.log(`console built: dist/console/assets/${js} (${(jsGzipBytes / 1024).toFixed(1)} KB gzipped), ${css}`);
  return { js, css, jsGzipBytes };
}

if (import.meta.main) await buildConsole();
