import net from 'node:net';

/**
 * A TCP forwarder on 127.0.0.1 whose target can change, so a restarted server keeps the address clients use.
 * `tap`, when given, is called once per connection and returns a listener that sees every chunk the client sends.
 */
export class TcpProxy {
  private server?: net.Server;
  private readonly sockets = new Set<net.Socket>();

  constructor(private targetPort: number, private readonly tap?: () => (chunk: Buffer) => void) {}

  /** Starts listening on a free port; returns it. */
  async listen(): Promise<number> {
    this.server = net.createServer((client) => {
      const upstream = net.connect(this.targetPort, '127.0.0.1');
      for (const socket of [client, upstream]) {
        this.sockets.add(socket);
        socket.on('close', () => this.sockets.delete(socket));
        socket.on('error', () => undefined);
      }
      if (this.tap) client.on('data', this.tap());
      client.pipe(upstream).pipe(client);
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    return (this.server.address() as net.AddressInfo).port;
  }

  /** Points new connections at another port (existing ones are cut). */
  retarget(port: number): void {
    this.targetPort = port;
    for (const socket of this.sockets) socket.destroy();
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}
