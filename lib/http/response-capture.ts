import type { ServerResponse } from 'node:http';
import {
  callbackOf, chunkBytes, copyHead, outgoingHeaders, outgoingStatus, patchResponse, PatchedResponse, sendInstead,
} from './raw-response';
import type { ResponseReplacement, WireResponse } from './stored-response';
import { LongTimer, setLongTimeout } from '../utils/long-timer';

/** What the capture asks of the interceptor. */
export interface CaptureHooks {
  /**
   * The whole response is known and nothing of it has been sent: record it. Resolves to what to send
   * instead, or undefined to send it as it is. Must not reject.
   */
  settle(response: WireResponse): Promise<ResponseReplacement | undefined>;
  /** The response is written in pieces (a stream): it is sent as it is, once this resolves, and will not be stored. */
  streamed(): Promise<void>;
  /**
   * The client left and, `withinMs` after the handler finished, nothing has sent the response (Nest skips
   * sending when the client of a handler's Observable is gone): the interceptor writes it itself.
   */
  unsent(): void;
}

type State = 'holding' | 'releasing' | 'streaming' | 'settling' | 'done';

/**
 * Captures the response of one request at the wire, below every interceptor, serializer and exception filter,
 * on Express and Fastify alike: both end a response sent in one piece with a single `end(body)`. That call is
 * held until `settle` has recorded it, so a client only sees a response that a retry will get again. A
 * response written in pieces (`write` before `end`: streams, files) is let through as it is written.
 */
export class ResponseCapture {
  private state: State = 'holding';
  private head?: unknown[];
  /** Writes made while the key is being released, sent in order once it is. */
  private readonly pending: ['write' | 'end', unknown[]][] = [];
  private clientGone = false;
  private handlerDoneWithin?: number;
  private unsentTimer?: LongTimer;
  private readonly original: PatchedResponse;

  constructor(private readonly raw: ServerResponse, private readonly hooks: CaptureHooks) {
    this.original = patchResponse(raw, {
      writeHead: (...args) => this.writeHead(args),
      write: (...args) => this.write(args),
      end: (...args) => this.end(args),
    });
    raw.once('close', () => this.closed());
  }

  /** The handler's value is a stream: everything goes out as it is written, nothing is held. */
  stream(): void {
    if (this.state !== 'holding') return;
    this.state = 'streaming';
    this.release();
  }

  /** The handler has finished: if its client is gone and nothing sends the response within `withinMs`, `unsent` is called. */
  handlerDone(withinMs: number): void {
    this.handlerDoneWithin = withinMs;
    this.watchUnsent();
  }

  private watchUnsent(): void {
    if (this.state !== 'holding' || !this.clientGone || this.handlerDoneWithin === undefined || this.unsentTimer) return;
    this.unsentTimer = setLongTimeout(() => {
      if (this.state === 'holding') this.hooks.unsent();
    }, this.handlerDoneWithin, { unref: true });
  }

  private writeHead(args: unknown[]): unknown {
    if (this.state === 'holding') this.head = copyHead(args);
    return this.raw;
  }

  private write(args: unknown[]): unknown {
    if (this.state === 'releasing') {
      this.pending.push(['write', args]);
      return true;
    }
    if (this.state !== 'holding') {
      callbackOf(args)?.();
      return true;
    }
    // A body in pieces: nothing goes out before the key is released, so a quick retry does not find it in progress.
    this.state = 'releasing';
    this.unsentTimer?.clear();
    this.pending.push(['write', args]);
    void this.hooks.streamed().then(() => {
      this.state = 'streaming';
      this.release();
      for (const [method, pendingArgs] of this.pending) this.original[method].apply(this.raw, pendingArgs);
      this.pending.length = 0;
    });
    return true;
  }

  private end(args: unknown[]): unknown {
    if (this.state === 'releasing') {
      this.pending.push(['end', args]);
      return this.raw;
    }
    if (this.state !== 'holding') return this.raw; // a second send while the first is being recorded
    this.state = 'settling';
    this.unsentTimer?.clear();
    const body = chunkBytes(args[0], args[1]) ?? Buffer.alloc(0);
    const callback = callbackOf(args);
    const response: WireResponse = { status: outgoingStatus(this.raw, this.head), headers: outgoingHeaders(this.raw, this.head), body };
    const send = (replacement: ResponseReplacement | undefined) => {
      this.state = 'done';
      this.original.restore();
      if (replacement) {
        sendInstead(this.raw, this.original, this.head, replacement, callback);
        return;
      }
      if (this.head) this.original.writeHead.apply(this.raw, this.head);
      this.original.end.call(this.raw, body, callback);
    };
    void this.hooks.settle(response).then(send, () => send(undefined));
    return this.raw;
  }

  /** A closed connection does not end the capture: Nest still sends a handler's value into it, and it is recorded. */
  private closed(): void {
    this.clientGone = true;
    this.watchUnsent();
  }

  /** Puts the original methods back and sends a status line held so far. */
  private release(): void {
    this.original.restore();
    if (this.head) this.original.writeHead.apply(this.raw, this.head);
  }
}
