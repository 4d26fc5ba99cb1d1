/**
 * The `tributary` command. serve/worker/migrate work on the database directly; every
 * administrative command talks to the running server's admin API with the admin token.
 */
import fs from 'node:fs';
import path from 'node:path';
import { Command, CommanderError } from 'commander';
import { ConfigError, loadConfig, type Config } from '../config.ts';
import { EXIT_CONFIG, EXIT_FAILURE, registerAdminCommands } from './admin-commands.ts';
import { registerFactsCommands } from './facts-import.ts';
import { addApiOptions, apiClientOf } from './api-client.ts';
import { registerConnectorCommands } from './connector-commands.ts';
import { registerWorkflowCommands } from './workflow-commands.ts';
import { registerDeleteCommands } from './delete-commands.ts';

function packageVersion(): string {
  const file = path.join(import.meta.dirname, '../../package.json');
  return (JSON.parse(fs.readFileSync(file, 'utf8')) as { version: string }).version;
}

/** What `serve` prints once /readyz says ready: where to go, and where the bootstrap credentials are. */
export function readyLine(url: string, config: Pick<Config, 'console' | 'dataDir'>): string {
  const bootstrap = path.join(config.dataDir, 'bootstrap.json');
  const where = config.console ? `console ${url}/console` : `API ${url}`;
  return `Tributary ready: ${where}${fs.existsSync(bootstrap) ? ` (bootstrap credentials in ${bootstrap})` : ''}`;
}

export async function runCli(
  argv: string[],
  io: { out: (s: string) => void; err: (s: string) => void } = { out: (s) => process.stdout.write(s), err: (s) => process.stderr.write(s) },
): Promise<number> {
  const program = new Command('tributary')
    .description('Tributary: harmonized business data and workflows')
    .option('--json', 'print exactly one JSON document on stdout')
    .exitOverride()
    .configureOutput({ writeOut: io.out, writeErr: io.err });

  program
    .command('serve')
    .description('serve the HTTP API (and run the worker unless --no-worker)')
    .option('--no-worker', 'serve HTTP only')
    .action(async (opts: { worker: boolean }) => {
      const config = loadConfig();
      // The server code loads only for the commands that run it: admin commands start fast.
      const { runUntilSignal, start } = await import('../server.ts');
      // Listening at once; ready (and /readyz 200) once the database answers.
      const running = await start(config, { http: true, worker: opts.worker && config.worker });
      running.deps.log.info({ url: running.url, engine: running.deps.engine }, 'tributary listening');
      if (!(opts.worker && config.worker) && running.deps.engine === 'pglite')
        running.deps.log.warn('no worker: workflow runs are queued but not executed until a `tributary serve` with the worker starts on this data directory');
      void running.ready.then(
        () => {
          running.deps.log.info({ url: running.url }, 'ready');
          // For people, beside the JSON logs on stdout: stderr, so stdout stays one JSON document a line.
          io.err(`${readyLine(running.url, config)}\n`);
        },
        () => undefined,
      );
      await runUntilSignal(running);
    });

  program
    .command('worker')
    .description('run the worker only: workflow runs and the scheduled sweep (PostgreSQL only)')
    .action(async () => {
      const config = loadConfig();
      if (!config.databaseUrl) {
        // PGlite is one process's database: a second process cannot open its data directory.
        throw new ConfigError(
          'DATABASE_URL',
          'must be set for `tributary worker`: embedded PGlite belongs to one process, so `tributary serve` runs the worker there',
        );
      }
      const { runUntilSignal, start } = await import('../server.ts');
      const running = await start(config, { http: false, worker: true });
      void running.ready.then(
        () => running.deps.log.info('worker started'),
        () => undefined,
      );
      await runUntilSignal(running);
    });

  program
    .command('relay')
    .description('the provider-facing edge: forward POST /hooks/:token to the service with a bearer token (docs/webhooks.md)')
    .action(async () => {
      const config = loadConfig();
      const { runRelay } = await import('../relay/run.ts');
      await runRelay(config);
    });

  program
    .command('migrate')
    .description('apply pending database migrations and exit')
    .action(async () => {
      const config = loadConfig();
      const { createDb } = await import('../db/connect.ts');
      const { migrate } = await import('../db/migrate.ts');
      const { db } = createDb({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
      try {
        const applied = await migrate(db);
        const json = program.opts().json === true;
        io.out(json ? `${JSON.stringify({ applied })}\n` : applied.length ? `applied: ${applied.join(', ')}\n` : 'database is up to date\n');
      } finally {
        await db.destroy();
      }
    });

  addApiOptions(program);
  registerAdminCommands(program, io);
  registerFactsCommands(program, io);
  registerWorkflowCommands(program, io);
  registerConnectorCommands(program, io, () => apiClientOf(program));
  registerDeleteCommands(program, io);

  // `--version` after a command is that command's (`workflow test --version N`): the
  // program's own --version, which commander would take wherever it stands, is only before one.
  const firstCommand = argv.findIndex((a) => program.commands.some((c) => c.name() === a));
  const versionFlag = argv.findIndex((a) => a === '--version' || a === '-V');
  if (firstCommand === -1 || versionFlag === -1 || versionFlag < firstCommand) program.version(packageVersion(), '-V, --version', 'print the version');

  try {
    await program.parseAsync(argv, { from: 'user' });
    return 0;
  } catch (err) {
    if (err instanceof CommanderError) return err.exitCode;
    const message = err instanceof Error ? err.message : String(err);
    const code = err instanceof ConfigError ? 'config_error' : 'failed';
    if (program.opts().json === true) io.out(`${JSON.stringify({ error: message, status: null, code })}\n`);
    else io.err(`error: ${message}\n`);
    return err instanceof ConfigError ? EXIT_CONFIG : EXIT_FAILURE;
  }
}
