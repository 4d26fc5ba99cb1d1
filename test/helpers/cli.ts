/** The real `tributary` command as a child process. */
import { spawn } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';

export const ROOT = path.resolve(import.meta.dirname, '../..');

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** A TCP port free on 127.0.0.1 right now, for a child process to listen on. */
export async function freePort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((resolve, reject) => {
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', resolve);
  });
  const { port } = srv.address() as net.AddressInfo;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

/** Runs `tributary ARGS` in the project directory under `env` (by default this process's). */
export function runCli(args: string[], env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: '1' }): Promise<CliRun> {
  return runProcess(process.execPath, ['src/main.ts', ...args], ROOT, env);
}

/** Runs a command to its end, collecting what it prints; `input`, when given, is its whole stdin. */
export function runProcess(command: string, args: string[], cwd: string, env: NodeJS.ProcessEnv, input?: string): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, env });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    if (input !== undefined) child.stdin.end(input);
  });
}
