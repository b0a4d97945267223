import type http from 'node:http';
import type net from 'node:net';
import { awaitsItsHandler, whenEnded } from './answer-end.js';

/** While stopping, connections that went idle are closed this often. */
const IDLE_SWEEP_MS = 250;
/**
 * How long a connection must have been idle before a stop closes it. A client sends its next request on
 * a kept-alive connection the moment the previous answer arrives: closing the connection as that answer
 * ends (as Node's closeIdleConnections does) races with it, and the client sees its request cut ("socket
 * hang up") instead of being answered 503 draining with Connection: close.
 */
const IDLE_GRACE_MS = 1000;

interface ConnectionState {
  /** Answers under way on the connection. */
  answering: number;
  /** When it last opened, began or ended an answer (ms). */
  activeAt: number;
}

/**
 * Makes `server` closable the graceful way (call it before the server listens). The closer stops
 * listening and waits for the requests under way. Connections idle for IDLE_GRACE_MS are closed now, and
 * the others as they reach it (checked every quarter second): a connection whose client keeps it open
 * after an answer (one that ignores Connection: close) is closed soon after it goes idle, not after the
 * keep-alive timeout. Busy ones otherwise close after their next response (Connection:
 * close while draining) or at `deadlineMs`, when whatever is still open is closed (main.ts exits with
 * code 1 at the same deadline).
 *
 * The closer also waits for the API's handlers whose client hung up: that closes the connection but does
 * not stop the handler (a payment waiting on its provider), and the process must not close its database
 * pool under it and exit, leaving the answer unrecorded. Those handlers always end their answer (ts-rest
 * writes it when the handler returns, client or no client); static files and the simulators' held
 * answers are dropped with their client and never ended, so only /v1 requests are waited for.
 */
export function gracefulCloser(server: http.Server): (deadlineMs: number) => Promise<void> {
  // Answers under way per connection, counted here rather than asked of Node: Node counts a connection
  // in the middle of sending a request, or that has sent nothing yet, busy until headersTimeout, so one a
  // client, browser or balancer opened ahead of need held the stop to the deadline. A connection with no
  // answer under way is closed here whatever Node thinks of it: closing it cuts no answer.
  const connections = new Map<net.Socket, ConnectionState>();
  const abandoned = new AbandonedAnswers();
  server.on('connection', (socket: net.Socket) => {
    connections.set(socket, { answering: 0, activeAt: Date.now() });
    socket.once('close', () => connections.delete(socket));
  });
  server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
    const state = connections.get(req.socket);
    if (!state) return;
    const api = awaitsItsHandler(req); // read now: routers rewrite req.url while they run
    state.answering += 1;
    state.activeAt = Date.now();
    res.once('close', () => {
      state.answering -= 1;
      state.activeAt = Date.now();
      if (api && !res.writableEnded) abandoned.hold(res);
    });
  });
  const closeIdle = () => {
    const idleSince = Date.now() - IDLE_GRACE_MS;
    for (const [socket, state] of connections) if (state.answering <= 0 && state.activeAt <= idleSince) socket.destroy();
  };
  return async (deadlineMs) => {
    let deadlinePassed!: () => void;
    const pastDeadline = new Promise<void>((resolve) => (deadlinePassed = resolve));
    const deadline = setTimeout(() => {
      server.closeAllConnections();
      deadlinePassed();
    }, deadlineMs);
    const sweep = setInterval(closeIdle, IDLE_SWEEP_MS);
    deadline.unref();
    sweep.unref();
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      closeIdle();
    });
    // Every connection is closed; the answers' own 'close' (next tick) has marked those still at work.
    await new Promise((resolve) => setImmediate(resolve));
    await Promise.race([abandoned.allEnded(), pastDeadline]);
    clearTimeout(deadline);
    clearInterval(sweep);
  };
}

/** Answers whose client left while their handler was still at work, until the handler ends them. */
class AbandonedAnswers {
  private readonly open = new Set<http.ServerResponse>();
  private readonly waiters: (() => void)[] = [];

  hold(res: http.ServerResponse): void {
    this.open.add(res);
    // The handler's res.json() (or an error handler's) ends it into the closed socket.
    whenEnded(res, () => {
      if (!this.open.delete(res) || this.open.size > 0) return;
      for (const resolve of this.waiters.splice(0)) resolve();
    });
  }

  /** Resolves once no such answer is left. */
  allEnded(): Promise<void> {
    if (this.open.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }
}
