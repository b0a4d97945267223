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
  // Connections that have not sent a byte yet. Node counts them busy (waiting for headers, until
  // headersTimeout), so closeIdleConnections leaves them: a connection a client, browser or balancer
  // opened ahead of need held the stop to the deadline. Closing one cuts no request.
  const sockets = new Set<net.Socket>();
  server.on('connection', (socket: net.Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  const closeIdle = () => {
    server.closeIdleConnections();
    for (const socket of sockets) if (socket.bytesRead === 0) socket.destroy();
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
