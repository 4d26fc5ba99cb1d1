#!/usr/bin/env node
/** Process entry: the `tributary` command. */
import { runCli } from './cli/cli.ts';

process.exitCode = await runCli(process.argv.slice(2));
