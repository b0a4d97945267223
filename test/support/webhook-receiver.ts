import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceivedRequest {
  headers: http.IncomingHttpHeaders;
  body: string;
  json: Record<string, any>;
}

/** A merchant's webhook endpoint on loopback that records every request and answers 200 (or fails on demand). */
export class WebhookReceiver {
  readonly received: ReceivedRequest[] = [];
  private failuresLeft = 0;
  private server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      let json: Record<string, any> = {};
      try {
        json = JSON.parse(body);
      } catch {
        json = {};
      }
      this.received.push({ headers: req.headers, body, json });
      if (this.failuresLeft > 0) {
        this.failuresLeft -= 1;
        res.writeHead(500).end('fail');
      } else res.writeHead(200).end('ok');
    });
  });

  url = '';

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/webhooks`;
    return this;
  }

  failNext(count: number) {
    this.failuresLeft = count;
  }

  events(type?: string) {
    return this.received.filter((r) => !type || r.json.type === type);
  }

  async stop() {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/** Polls `check` until it returns a truthy value or `timeoutMs` passes (tests only). */
export async function eventually<T>(check: () => Promise<T> | T, timeoutMs = 10_000, what = 'condition'): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  let last: T | undefined;
  while (Date.now() < deadline) {
    last = await check();
    if (last) return last as NonNullable<T>;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for ${what} (last value: ${JSON.stringify(last)})`);
}
