import net from 'node:net';

/** Startup-phase request codes after which the client sends another startup-phase message. */
const SSL_REQUEST = 80877103;
const GSSENC_REQUEST = 80877104;

/**
 * A TCP forwarder to Postgres on 127.0.0.1 that counts the statements its clients execute, by reading the
 * frontend messages of the wire protocol: one `Execute` (extended protocol) or `Query` (simple protocol) is one
 * statement. Point a connection URL at `listen()`'s port to count what a component asks Postgres.
 */
export class PgStatementCounter {
  private server?: net.Server;
  private readonly sockets = new Set<net.Socket>();
  private executed = 0;

  constructor(private readonly targetPort: number) {}

  /** Statements executed through the counter so far. */
  get count(): number {
    return this.executed;
  }

  /** Starts listening on a free port; returns it. */
  async listen(): Promise<number> {
    this.server = net.createServer((client) => {
      const upstream = net.connect(this.targetPort, '127.0.0.1');
      for (const socket of [client, upstream]) {
        this.sockets.add(socket);
        socket.on('close', () => this.sockets.delete(socket));
        socket.on('error', () => undefined);
      }
      let buffer = Buffer.alloc(0);
      let startup = true;
      client.on('data', (chunk: Buffer) => {
        upstream.write(chunk);
        buffer = Buffer.concat([buffer, chunk]);
        for (;;) {
          if (startup) {
            if (buffer.length < 8) break;
            const length = buffer.readInt32BE(0);
            if (buffer.length < length) break;
            const code = buffer.readInt32BE(4);
            startup = code === SSL_REQUEST || code === GSSENC_REQUEST;
            buffer = buffer.subarray(length);
            continue;
          }
          if (buffer.length < 5) break;
          const length = buffer.readInt32BE(1);
          if (buffer.length < 1 + length) break;
          const type = String.fromCharCode(buffer[0]);
          if (type === 'E' || type === 'Q') this.executed++;
          buffer = buffer.subarray(1 + length);
        }
      });
      upstream.pipe(client);
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    return (this.server.address() as net.AddressInfo).port;
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}

/** The same Postgres URL with another port (to go through a proxy on 127.0.0.1). */
export function withPort(url: string, port: number): string {
  const parsed = new URL(url);
  parsed.hostname = '127.0.0.1';
  parsed.port = String(port);
  return parsed.toString();
}
