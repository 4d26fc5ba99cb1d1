/**
 * `tributary relay`: the relay as its own process, in front of a service elsewhere
 * (RELAY_TARGET_URL), with its account from RELAY_CLIENT_ID and RELAY_CLIENT_SECRET or
 * RELAY_CREDENTIALS_FILE. SIGTERM/SIGINT: /healthz turns 503, the listener stops accepting,
 * deliveries in flight finish (bounded by SHUTDOWN_GRACE_MS).
 */
import { ConfigError, type Config } from '../config.ts';
import { createLogger } from '../log.ts';
import { createRelay, relayCredentials } from './relay.ts';

/** The port `tributary relay` listens on when RELAY_PORT is not set. */
export const DEFAULT_RELAY_PORT = 8081;

export async function runRelay(config: Config): Promise<void> {
  const credentials = relayCredentials(config, undefined);
  if (!credentials)
    throw new ConfigError(
      'RELAY_CLIENT_ID',
      'and RELAY_CLIENT_SECRET, or RELAY_CREDENTIALS_FILE, must be set for `tributary relay`: the service account it forwards as',
    );
  const log = createLogger(config);
  const targetUrl = config.relay.targetUrl ?? `http://127.0.0.1:${config.port}`;
  const relay = await createRelay({ config, log, targetUrl, credentials });
  const url = await relay.listen(config.relay.port ?? DEFAULT_RELAY_PORT, config.relay.host);
  log.info({ url, target: targetUrl }, 'tributary relay listening');
  await new Promise<void>((resolve) => {
    const onSignal = (signal: string) => {
      process.off('SIGTERM', onSignal);
      process.off('SIGINT', onSignal);
      log.info({ signal }, 'relay draining');
      relay.stop().then(
        () => {
          log.info('relay stopped');
          resolve();
        },
        (err: unknown) => {
          log.error({ err }, 'relay shutdown failed');
          resolve();
        },
      );
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
  });
}
