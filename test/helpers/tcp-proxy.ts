/** A TCP proxy for fault tests: the database (or any server) reached through it can be cut off and brought back. */
import net from 'node:net';
import { once } from 'node:events';

/** A TCP proxy to PostgreSQL that can drop every connection, hold them unanswered, or stop listening. */
export async function tcpProxy(target: { host: string; port: number }) {
  const sockets = new Set<net.Socket>();
  let dropping = false;
  let holding = false;
  const server = net.createServer((client) => {
    if (dropping) {
      client.destroy();
      return;
    }
    if (holding) {
      // Accepted, never answered: what a client sees of a host that drops its packets.
      sockets.add(client);
      client.on('error', () => undefined).on('close', () => sockets.delete(client));
      return;
    }
    const upstream = net.connect(target.port, target.host);
    sockets.add(client).add(upstream);
    const end = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    for (const s of [client, upstream]) {
      s.on('error', end);
      s.on('close', end);
    }
    client.pipe(upstream).pipe(client);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as net.AddressInfo;
  return {
    port,
    /** Ends every open connection and drops new ones as soon as they are accepted. */
    cut() {
      dropping = true;
      for (const s of sockets) s.destroy();
    },
    /** New connections are accepted and never answered (a blackhole); open ones are ended. */
    blackhole() {
      this.cut();
      dropping = false;
      holding = true;
    },
    restore() {
      dropping = false;
      holding = false;
    },
    /** Stops listening: new connections are refused (ECONNREFUSED). */
    async refuse() {
      this.cut();
      await new Promise<void>((r) => server.close(() => r()));
    },
    async listenAgain() {
      dropping = false;
      holding = false;
      server.listen(port, '127.0.0.1');
      await once(server, 'listening');
    },
    async close() {
      this.cut();
      if (server.listening) await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
