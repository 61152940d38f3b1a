import type { PoolClient } from 'pg';

/** The parts of node-postgres' `Query` (and of its protocol connection) that a query carrying a START uses. */
interface PgQuery {
  text: string;
  values?: unknown[];
  name?: string;
  rows?: number;
  callback?: (err: Error | null, result?: unknown) => void;
  requiresPreparation(): boolean;
  prepare(connection: PgConnection): void;
  handleCommandComplete(msg: unknown, connection: PgConnection): void;
}
interface PgConnection {
  parse(query: { text: string }): void;
  bind(config: Record<string, never>): void;
  execute(config: Record<string, never>): void;
}
type PgQueryClass = new (config: unknown, values?: unknown) => PgQuery;
type CarryingQueryClass = new (start: string, config: unknown, values?: unknown) => PgQuery;
type ClientQuery = (...args: unknown[]) => unknown;

/** The deferred START of a transaction: whether it has gone to Postgres, and the way to call it off. */
export interface DeferredStart {
  /** True once a statement carried the START to Postgres (the transaction is open there). */
  readonly sent: boolean;
  /** Restores the connection's own `query`; the START is never sent. */
  cancel(): void;
}

const subclasses = new WeakMap<PgQueryClass, CarryingQueryClass>();

/**
 * A `Query` of the driver's node-postgres that sends `start` in the same write as its own statement: with parameters,
 * as an unnamed Parse/Bind/Execute before the query's own, with no Sync between them; without, as the first
 * statement of its simple-protocol text. The START's CommandComplete is not the caller's: it is dropped, so the
 * query answers exactly what it would have answered alone.
 */
function queryCarryingStart(Query: PgQueryClass): CarryingQueryClass {
  let subclass = subclasses.get(Query);
  if (!subclass) {
    subclass = class QueryCarryingStart extends Query {
      private startAnswered = false;
      private readonly start: string;

      constructor(start: string, config: unknown, values?: unknown) {
        super(config, values);
        this.start = start;
        if (!this.requiresPreparation()) this.text = `${start};\n${this.text}`;
      }

      override prepare(connection: PgConnection): void {
        // node-postgres corks the socket around prepare(): these messages and the query's own leave in one write
        connection.parse({ text: this.start });
        connection.bind({});
        connection.execute({});
        super.prepare(connection);
      }

      override handleCommandComplete(msg: unknown, connection: PgConnection): void {
        if (!this.startAnswered) {
          this.startAnswered = true;
          return;
        }
        super.handleCommandComplete(msg, connection);
      }
    };
    subclasses.set(Query, subclass);
  }
  return subclass;
}

/**
 * Makes the next statement sent on `client` carry `start` (a START TRANSACTION) in its own round trip, instead of
 * the START costing one of its own. Applies while `holds()` (the connection still belongs to the transaction); a
 * connection given back to the pool before any statement never sends it. `Query` is the driver's node-postgres
 * `Query` class. Statements node-postgres cannot prefix this way (a query config object, a custom submittable such
 * as a query stream, a callback; any statement on the native client) get the START queued ahead of them instead: same
 * order, one more round trip.
 */
export function startWithFirstStatement(client: PoolClient, start: string, Query: PgQueryClass, holds: () => boolean): DeferredStart {
  const target = client as unknown as { query: ClientQuery };
  const ownQuery = Object.prototype.hasOwnProperty.call(target, 'query') ? target.query : undefined;
  const send = target.query;
  // node-postgres' JavaScript client; the native one (pg-native) speaks the protocol itself and cannot carry it
  const carries = typeof (client as unknown as { connection?: Partial<PgConnection> }).connection?.parse === 'function';
  let sent = false;
  let armed = true;
  const disarm = () => {
    if (!armed) return;
    armed = false;
    if (ownQuery) target.query = ownQuery;
    else delete (target as { query?: ClientQuery }).query;
  };
  target.query = function queryAfterStart(this: unknown, config: unknown, values?: unknown, callback?: unknown): unknown {
    disarm();
    if (!holds()) return send.call(client, config, values, callback);
    sent = true;
    const text = typeof config === 'string' ? config : undefined;
    if (carries && text !== undefined && callback === undefined && (values === undefined || Array.isArray(values))) {
      const query = new (queryCarryingStart(Query))(start, text, values);
      // a submitted Query object is answered through its callback (node-postgres makes the promise only for text)
      return new Promise((resolve, reject) => {
        query.callback = (err: Error | null, result?: unknown) => (err ? reject(err) : resolve(result));
        send.call(client, query);
      });
    }
    // Queued first, so it still runs first. A START TRANSACTION fails only with its connection, and then so does
    // every statement after it.
    void (send.call(client, start) as Promise<unknown>).catch(() => undefined);
    return send.call(client, config, values, callback);
  };
  return {
    get sent() {
      return sent;
    },
    cancel: disarm,
  };
}
