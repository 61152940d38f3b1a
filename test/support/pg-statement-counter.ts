import { TcpProxy } from '../workflow/tcp-proxy';

/** Startup-phase request codes after which the client sends another startup-phase message. */
const SSL_REQUEST = 80877103;
const GSSENC_REQUEST = 80877104;

/**
 * A TCP forwarder to Postgres on 127.0.0.1 that counts the statements its clients execute, by reading the
 * frontend messages of the wire protocol: one `Execute` (extended protocol) or `Query` (simple protocol) is one
 * statement. Point a connection URL at `listen()`'s port to count what a component asks Postgres.
 */
export class PgStatementCounter {
  private readonly proxy: TcpProxy;
  private executed = 0;

  constructor(targetPort: number) {
    this.proxy = new TcpProxy(targetPort, () => this.parser());
  }

  /** Statements executed through the counter so far. */
  get count(): number {
    return this.executed;
  }

  /** Starts listening on a free port; returns it. */
  listen(): Promise<number> {
    return this.proxy.listen();
  }

  close(): Promise<void> {
    return this.proxy.close();
  }

  /** A parser of one connection's frontend messages. */
  private parser(): (chunk: Buffer) => void {
    let buffer = Buffer.alloc(0);
    let startup = true;
    return (chunk) => {
      buffer = Buffer.concat([buffer, chunk]);
      for (;;) {
        if (startup) {
          if (buffer.length < 8) return;
          const length = buffer.readInt32BE(0);
          if (buffer.length < length) return;
          const code = buffer.readInt32BE(4);
          startup = code === SSL_REQUEST || code === GSSENC_REQUEST;
          buffer = buffer.subarray(length);
          continue;
        }
        if (buffer.length < 5) return;
        const length = buffer.readInt32BE(1);
        if (buffer.length < 1 + length) return;
        const type = String.fromCharCode(buffer[0]);
        if (type === 'E' || type === 'Q') this.executed++;
        buffer = buffer.subarray(1 + length);
      }
    };
  }
}

/** The same Postgres URL with another port (to go through a proxy on 127.0.0.1). */
export function withPort(url: string, port: number): string {
  const parsed = new URL(url);
  parsed.hostname = '127.0.0.1';
  parsed.port = String(port);
  return parsed.toString();
}
