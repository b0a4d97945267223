import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** One request the probe forwarded, with when it started and ended (test clock). */
export interface ProbedCall {
  path: string;
  key: string | null;
  startedAt: number;
  endedAt: number;
}

/**
 * A reverse proxy between the service and a provider (here the built-in simulator): forwards every
 * request unchanged, optionally holding chosen ones for a while first, and records each call and how
 * many calls with the same key were in flight at once. Tests point a provider's base URL at it to see
 * what the service's processes really send, and when.
 */
export class UpstreamProbe {
  readonly calls: ProbedCall[] = [];
  private readonly inFlight = new Map<string, number>();
  private readonly maxInFlight = new Map<string, number>();
  private readonly server: http.Server;
  url = '';

  /**
   * @param target where requests go (e.g. `${api}/sandbox/mobilemoney`)
   * @param keyOf the key a call is grouped by (e.g. the shortcode in the body), or null to not track it
   * @param holdMs how long to hold a tracked call before forwarding it
   */
  constructor(
    private readonly target: string,
    private readonly keyOf: (path: string, body: string) => string | null,
    private readonly holdMs: number,
  ) {
    this.server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        void this.forward(req, Buffer.concat(chunks), res);
      });
    });
  }

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  /** The most calls with `key` that were ever in flight at the same moment. */
  peakConcurrency(key: string): number {
    return this.maxInFlight.get(key) ?? 0;
  }

  callsFor(key: string): ProbedCall[] {
    return this.calls.filter((c) => c.key === key);
  }

  private async forward(req: http.IncomingMessage, body: Buffer, res: http.ServerResponse) {
    const path = req.url ?? '/';
    let key: string | null;
    try {
      key = this.keyOf(path, body.toString('utf8'));
    } catch {
      key = null; // a body the key function cannot read is forwarded untracked
    }
    const startedAt = Date.now();
    if (key !== null) {
      const now = (this.inFlight.get(key) ?? 0) + 1;
      this.inFlight.set(key, now);
      this.maxInFlight.set(key, Math.max(now, this.maxInFlight.get(key) ?? 0));
      await new Promise((r) => setTimeout(r, this.holdMs));
    }
    try {
      const headers: Record<string, string> = {};
      for (const [name, value] of Object.entries(req.headers)) {
        if (typeof value === 'string' && !['host', 'connection', 'content-length'].includes(name)) headers[name] = value;
      }
      const upstream = await fetch(`${this.target}${path}`, {
        method: req.method,
        headers,
        body: req.method === 'GET' || req.method === 'HEAD' ? undefined : new Uint8Array(body),
      });
      const text = Buffer.from(await upstream.arrayBuffer());
      res.writeHead(upstream.status, { 'Content-Type': upstream.headers.get('content-type') ?? 'application/json' }).end(text);
    } catch {
      res.writeHead(502).end();
    } finally {
      if (key !== null) {
        this.inFlight.set(key, (this.inFlight.get(key) ?? 1) - 1);
        this.calls.push({ path, key, startedAt, endedAt: Date.now() });
      }
    }
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
