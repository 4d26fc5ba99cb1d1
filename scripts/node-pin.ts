/**
 * The last line of `npm install` when npm itself runs on another Node than the pinned one
 * (the `node` devDependency, which every npm script and `npx tributary` run on). npm checks
 * each package's `engines` against its own Node, before any script can run, so on Node 20
 * it warns EBADENGINE for every dependency that needs Node 22 or 24; this says what they mean.
 */
const npmNode = /\bnode\/(v\d+)\.\d+\.\d+/.exec(process.env.npm_config_user_agent ?? '');
const pinned = process.version.split('.')[0];
if (npmNode && npmNode[1] !== pinned)
  process.stdout.write(
    `Tributary runs on Node ${process.version}, installed as its "node" devDependency: npm start, npm test and npx tributary use it. ` +
      `npm itself runs on ${/\bnode\/(\S+)/.exec(process.env.npm_config_user_agent!)![1]}: its EBADENGINE warnings above do not apply to them.\n`,
  );
