import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';

export interface Receipt {
  webhookId: string;
  eventType: string;
  paymentId: string | null;
  /** performance.now() of this process when the request body had arrived. */
  at: number;
}

/**
 * The merchant's webhook endpoint: answers 200 at once and records when each delivery arrived. It is
 * cheap next to the sender (the webhook bench reports its CPU per delivery), so it does not bound the rate.
 */
export class WebhookReceiver {
  private server: http.Server | null = null;
  readonly receipts: Receipt[] = [];
  /** First arrival per X-Webhook-Id (a retry of the same delivery is not a new one). */
  readonly byWebhookId = new Map<string, Receipt>();
  readonly byPaymentId = new Map<string, Receipt>();
  private waiters: { count: number; resolve: () => void }[] = [];
  /** TCP connections opened to it: how well the sender reuses keep-alive connections. */
  connections = 0;
  url = '';

  async start(): Promise<this> {
    this.server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const at = performance.now();
        res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
        const webhookId = String(req.headers['x-webhook-id'] ?? '');
        let paymentId: string | null = null;
        try {
          paymentId = (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { data?: { payment_id?: string } }).data?.payment_id ?? null;
        } catch {
          // not JSON: recorded without a payment id
        }
        const receipt: Receipt = { webhookId, eventType: String(req.headers['x-event-type'] ?? ''), paymentId, at };
        this.receipts.push(receipt);
        if (!this.byWebhookId.has(webhookId)) {
          this.byWebhookId.set(webhookId, receipt);
          if (paymentId && !this.byPaymentId.has(paymentId)) this.byPaymentId.set(paymentId, receipt);
        }
        this.waiters = this.waiters.filter((w) => (this.byWebhookId.size >= w.count ? (w.resolve(), false) : true));
      });
    });
    this.server.on('connection', () => (this.connections += 1));
    this.server.keepAliveTimeout = 30_000;
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/webhooks`;
    return this;
  }

  /** Resolves true once `count` distinct deliveries arrived, false at the timeout. */
  waitForDistinct(count: number, timeoutMs: number): Promise<boolean> {
    if (this.byWebhookId.size >= count) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(false), timeoutMs);
      this.waiters.push({ count, resolve: () => (clearTimeout(timer), resolve(true)) });
    });
  }

  reset(): void {
    this.receipts.length = 0;
    this.byWebhookId.clear();
    this.byPaymentId.clear();
  }

  async stop(): Promise<void> {
    if (!this.server) return;
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server!.close(() => resolve()));
  }
}
