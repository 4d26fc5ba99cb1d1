import fs from 'node:fs';
import path from 'node:path';
import { randomSecret, SECRET_PREFIX } from './secrets.ts';

const ADMIN_TOKEN_FILE = 'admin-token';

/**
 * The admin token: TRIBUTARY_ADMIN_TOKEN, or the one generated into DATA_DIR/admin-token
 * (mode 0600) on first start so the CLI on the same machine finds it.
 */
export function resolveAdminToken(configured: string | undefined, dataDir: string): string {
  if (configured) return configured;
  const file = path.join(dataDir, ADMIN_TOKEN_FILE);
  try {
    return fs.readFileSync(file, 'utf8').trim();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const token = randomSecret(SECRET_PREFIX.adminToken);
  // Written aside, then linked into place: of two processes starting at once on one DATA_DIR
  // (serve --no-worker and worker), one wins and the other reads the complete file.
  const tmp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, `${token}\n`, { mode: 0o600 });
  try {
    fs.linkSync(tmp, file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    return fs.readFileSync(file, 'utf8').trim();
  } finally {
    fs.rmSync(tmp, { force: true });
  }
  return token;
}

export function readAdminTokenFile(dataDir: string): string | undefined {
  try {
    return fs.readFileSync(path.join(dataDir, ADMIN_TOKEN_FILE), 'utf8').trim();
  } catch {
    return undefined;
  }
}
