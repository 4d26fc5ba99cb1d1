/** A JSON logger whose lines a test reads back: what the service logged, line by line. */
import { Writable } from 'node:stream';
import type { Logger } from 'pino';
import { createLogger } from '../../src/log.ts';

export function capturedLog(opts: { adminToken?: string } = {}): { log: Logger; lines: string[] } {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(
        ...chunk
          .toString('utf8')
          .split('\n')
          .filter((l) => l !== ''),
      );
      done();
    },
  });
  return { log: createLogger({ logLevel: 'info', logFormat: 'json', ...opts }, sink), lines };
}
