import type http from 'node:http';
import type net from 'node:net';

/** While stopping, connections that went idle are closed this often. */
const IDLE_SWEEP_MS = 250;

/**
 * Makes `server` closable the graceful way (call it before the server listens). The closer stops
 * listening and waits for the requests under way. Idle connections are closed now, and again every
 * quarter second: a connection whose response was already under way when the drain began (so it carries
 * no Connection: close) is closed as soon as it goes idle, not after the keep-alive timeout. Busy ones
 * otherwise close after their next response (Connection: close while draining) or at `deadlineMs`, when
 * whatever is still open is closed (main.ts exits with code 1 at the same deadline).
 */
export function gracefulCloser(server: http.Server): (deadlineMs: number) => Promise<void> {
  // Answers under way per connection. Node's closeIdleConnections leaves a connection that is in the
  // middle of sending a request, or has sent nothing yet (it counts both busy until headersTimeout): one a
  // client, browser or balancer opened ahead of need held the stop to the deadline. A connection with no
  // answer under way is closed here whatever Node thinks of it: closing it cuts no answer.
  const answering = new Map<net.Socket, number>();
  server.on('connection', (socket: net.Socket) => {
    answering.set(socket, 0);
    socket.once('close', () => answering.delete(socket));
  });
  server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
    const socket = req.socket;
    answering.set(socket, (answering.get(socket) ?? 0) + 1);
    res.once('close', () => {
      const n = answering.get(socket);
      if (n !== undefined) answering.set(socket, n - 1);
    });
  });
  const closeIdle = () => {
    server.closeIdleConnections();
    for (const [socket, n] of answering) if (n <= 0) socket.destroy();
  };
  return async (deadlineMs) => {
    const deadline = setTimeout(() => server.closeAllConnections(), deadlineMs);
    const sweep = setInterval(closeIdle, IDLE_SWEEP_MS);
    deadline.unref();
    sweep.unref();
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      closeIdle();
    });
    clearTimeout(deadline);
    clearInterval(sweep);
  };
}
