/**
 * Builds dist/: ES2022 JavaScript and .d.ts from src/ with the repository's TypeScript, so an
 * installed package never loads TypeScript (Node refuses to strip types under node_modules,
 * and Node 20 and 22 cannot at all). `npm pack` runs it (prepack). Plain JavaScript, so any
 * Node the package supports can run it.
 *
 * tsc rewrites `./x.ts` to `./x.js` in the JavaScript but not in the declarations, and does
 * not copy the generated src/schema.d.ts: both are done here, then the output is checked.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const pkg = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const dist = path.join(pkg, 'dist');
const tsc = createRequire(path.join(pkg, 'package.json')).resolve('typescript/bin/tsc');

fs.rmSync(dist, { recursive: true, force: true });
execFileSync(process.execPath, [tsc, '-p', path.join(pkg, 'tsconfig.build.json')], { stdio: 'inherit' });
fs.copyFileSync(path.join(pkg, 'src', 'schema.d.ts'), path.join(dist, 'schema.d.ts'));

// import/export ... from './x.ts' and import('./x.ts'), as tsc writes them.
const RELATIVE_TS = /(\bfrom\s*|\bimport\(\s*)(['"])(\.{1,2}\/[^'"]*?)(\.d)?\.ts\2/g;
const left = [];
for (const name of fs.readdirSync(dist)) {
  const file = path.join(dist, name);
  if (name.endsWith('.d.ts') && name !== 'schema.d.ts') {
    fs.writeFileSync(
      file,
      fs.readFileSync(file, 'utf8').replace(RELATIVE_TS, (_, lead, q, spec) => `${lead}${q}${spec}.js${q}`),
    );
  }
  if (name.endsWith('.js') || name.endsWith('.d.ts')) {
    for (const m of fs.readFileSync(file, 'utf8').matchAll(RELATIVE_TS)) left.push(`${name}: ${m[0]}`);
  }
}
if (left.length > 0) throw new Error(`dist still imports TypeScript files:\n${left.join('\n')}`);
console.log(`built ${path.relative(process.cwd(), dist) || 'dist'}`);
