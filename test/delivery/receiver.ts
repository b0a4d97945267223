import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceivedRequest {
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

interface Behaviour {
  /** Answer this many requests with `status` before answering 200. Infinity = always. */
  failures: number;
  status: number;
  /** Leave this many requests unanswered (past the service's timeout) before answering. */
  hangs: number;
  /** Answer this many requests (200) only after `delayMs`. */
  slow?: { count: number; delayMs: number };
}

/**
 * A merchant's webhook endpoint on 127.0.0.1: records every request (path, headers, raw body) and
 * behaves per path as told — fail N times, always fail, hang, or answer late.
 */
export class WebhookReceiver {
  readonly requests: ReceivedRequest[] = [];
  private readonly behaviours = new Map<string, Behaviour>();
  /** Per path: the next request is held until the test releases it (see holdNext). */
  private readonly holds = new Map<string, (respond: (status: number) => void) => void>();
  private readonly server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const path = req.url ?? '/';
      this.requests.push({ path, headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      const hold = this.holds.get(path);
      if (hold) {
        this.holds.delete(path);
        hold((status) => {
          if (status >= 200 && status < 300) res.writeHead(status, { 'Content-Type': 'application/json' }).end('{"received":true}');
          else res.writeHead(status, { 'Content-Type': 'text/plain' }).end('receiver says no');
        });
        return;
      }
      const b = this.behaviours.get(path);
      if (b && b.hangs > 0) {
        b.hangs -= 1;
        return; // never answered; closed at stop()
      }
      if (b?.slow && b.slow.count > 0) {
        b.slow.count -= 1;
        setTimeout(() => res.writeHead(200, { 'Content-Type': 'application/json' }).end('{"received":true}'), b.slow.delayMs);
        return;
      }
      if (b && b.failures > 0) {
        b.failures -= 1;
        res.writeHead(b.status, { 'Content-Type': 'text/plain' }).end('receiver says no');
        return;
      }
      res.writeHead(200, { 'Content-Type': 'application/json' }).end('{"received":true}');
    });
  });
  private port = 0;

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
    return this;
  }

  url(path: string): string {
    return `http://127.0.0.1:${this.port}${path}`;
  }

  failNext(path: string, count: number, status = 500): void {
    this.behaviours.set(path, { failures: count, status, hangs: 0 });
  }

  alwaysFail(path: string, status = 503): void {
    this.failNext(path, Number.POSITIVE_INFINITY, status);
  }

  hangNext(path: string, count: number): void {
    this.behaviours.set(path, { failures: 0, status: 200, hangs: count });
  }

  /** Answers the next `count` requests to `path` with 200, each only after `delayMs`. */
  slowNext(path: string, count: number, delayMs: number): void {
    this.behaviours.set(path, { failures: 0, status: 200, hangs: 0, slow: { count, delayMs } });
  }

  /**
   * Holds the next request to `path` unanswered until the returned `release(status)`, which answers it
   * with `status` (a merchant's endpoint that takes its time, as long as the test needs).
   */
  holdNext(path: string): (status: number) => void {
    let respond: ((status: number) => void) | null = null;
    let releasedWith: number | null = null;
    this.holds.set(path, (r) => {
      if (releasedWith === null) respond = r;
      else r(releasedWith);
    });
    return (status) => {
      releasedWith = status;
      respond?.(status);
    };
  }

  succeed(path: string): void {
    this.behaviours.delete(path);
  }

  on(path: string): ReceivedRequest[] {
    return this.requests.filter((r) => r.path === path);
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/** Polls `probe` until it returns a truthy value (bounded), for outcomes produced by jobs. */
export async function waitFor<T>(probe: () => Promise<T | null | undefined | false>, what: string, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
