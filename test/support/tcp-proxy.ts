import net from 'node:net';

interface Pair {
  client: net.Socket;
  upstream: net.Socket;
  /** Nothing passes either way any more, and neither end is told: a path that died silently. */
  silent: boolean;
}

/**
 * A TCP relay between the service's processes and PostgreSQL, so a test can make one connection go
 * silent the way a NAT that dropped its state or a hard failover does: both sockets stay open, bytes
 * are dropped, neither side sees an error or a close. Connections are told apart by the port the relay
 * connects to the database from, which PostgreSQL shows as pg_stat_activity.client_port.
 */
export class TcpProxy {
  private readonly pairs = new Set<Pair>();
  private readonly server: net.Server;
  /** New connections are silent from the start (see `blackHole`). */
  private blackHoled = false;
  /** The port it listened on before `refuse`. */
  private port = 0;
  /** New connections reach the database this much later (see `delayConnections`). */
  private connectDelayMs = 0;
  /** Connections held back by that delay. */
  private readonly waiting = new Set<net.Socket>();

  /**
   * With `dropNotifications`, PostgreSQL's notifications (NotificationResponse messages) never reach the
   * service, the way a LISTEN through a transaction-mode pooler hears nothing: it ran on some server
   * connection, not on a session of the client's own.
   */
  constructor(
    private target: { host: string; port: number },
    private readonly options: { dropNotifications?: boolean } = {},
  ) {
    this.server = net.createServer((client) => {
      if (this.connectDelayMs === 0) return this.relay(client);
      // A slow network or a database slow to accept: the client waits; one that gave up meanwhile never reaches it.
      client.pause();
      this.waiting.add(client);
      client.on('error', () => client.destroy());
      const timer = setTimeout(() => {
        this.waiting.delete(client);
        if (client.destroyed) return;
        this.relay(client);
        client.resume();
      }, this.connectDelayMs);
      client.once('close', () => {
        clearTimeout(timer);
        this.waiting.delete(client);
      });
    });
  }

  private relay(client: net.Socket): void {
    const upstream = net.connect(this.target.port, this.target.host);
    const pair: Pair = { client, upstream, silent: this.blackHoled };
    this.pairs.add(pair);
    client.on('data', (chunk) => {
      if (!pair.silent) upstream.write(chunk);
    });
    const toClient = this.options.dropNotifications ? withoutNotifications() : (chunk: Buffer) => chunk;
    upstream.on('data', (chunk: Buffer) => {
      if (!pair.silent) client.write(toClient(chunk));
    });
    const close = () => {
      if (pair.silent) return;
      client.destroy();
      upstream.destroy();
      this.pairs.delete(pair);
    };
    for (const socket of [client, upstream]) {
      socket.on('close', close);
      socket.on('error', close);
    }
  }

  /** Every new connection reaches the database `ms` later (0: at once); the open ones are untouched. */
  delayConnections(ms: number): void {
    this.connectDelayMs = ms;
  }

  /** New connections go to `target` from now on (the database came back elsewhere: a restarted cluster's new port). */
  retarget(target: { host: string; port: number }): void {
    this.target = target;
  }

  /** Listens on a free loopback port; returns `databaseUrl` pointed at the relay. */
  async start(databaseUrl: string): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    const url = new URL(databaseUrl);
    url.hostname = '127.0.0.1';
    url.port = String((this.server.address() as net.AddressInfo).port);
    return url.toString();
  }

  /** Silences the connection PostgreSQL sees coming from `clientPort`; false if there is none. */
  silence(clientPort: number): boolean {
    for (const pair of this.pairs) {
      if (pair.upstream.localPort === clientPort) {
        pair.silent = true;
        return true;
      }
    }
    return false;
  }

  /** The database host is gone without a trace: every connection goes silent, and so does every new one. */
  blackHole(): void {
    this.blackHoled = true;
    for (const pair of this.pairs) pair.silent = true;
  }

  /**
   * The database host stopped: the relay closes every connection and stops listening, so a new
   * connection is refused (ECONNREFUSED) until `reopen`.
   */
  async refuse(): Promise<void> {
    this.port = (this.server.address() as net.AddressInfo).port;
    for (const pair of this.pairs) {
      pair.client.destroy();
      pair.upstream.destroy();
    }
    this.pairs.clear();
    for (const client of this.waiting) client.destroy();
    this.waiting.clear();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  /** Listens again where it did before `refuse`: the database is back. */
  async reopen(): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(this.port, '127.0.0.1', resolve));
  }

  /** New connections reach the database again, as after a failover; the silenced ones stay dead. */
  restore(): void {
    this.blackHoled = false;
  }

  async stop(): Promise<void> {
    if (this.server.listening) await this.refuse();
  }
}

/**
 * Filters the server's side of the protocol (every message a type byte and a length; no TLS here):
 * NotificationResponse ('A') messages are dropped, the rest passes in order.
 */
function withoutNotifications(): (chunk: Buffer) => Buffer {
  let pending = Buffer.alloc(0);
  return (chunk) => {
    pending = Buffer.concat([pending, chunk]);
    const kept: Buffer[] = [];
    let at = 0;
    while (pending.length - at >= 5) {
      const end = at + 1 + pending.readInt32BE(at + 1);
      if (end > pending.length) break;
      if (pending[at] !== 0x41) kept.push(pending.subarray(at, end));
      at = end;
    }
    pending = pending.subarray(at);
    return Buffer.concat(kept);
  };
}
