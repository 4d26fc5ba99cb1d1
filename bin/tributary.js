#!/usr/bin/env node
// The service is TypeScript run by Node's own type stripping, which Node 24 has.
const major = Number(process.versions.node.split('.')[0]);
if (major < 24) {
  process.stderr.write(`tributary needs Node 24 (this is ${process.version}); run it through npm (npm start, npx tributary), which uses the pinned Node.\n`);
  process.exit(1);
}
await import('../src/main.ts');
