import { randomBytes, randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { MobilemoneyCredentials } from '../../contract/index.js';
import type { MobilemoneyPaymentInput } from '../../server/providers/mobilemoney/adapter.js';
import { SANDBOX_PASSKEY } from '../../server/sandbox/mobilemoney/test-values.js';

export interface Received {
  path: string;
  json: any;
}

/** The merchant-side endpoint the operator calls back: records every POST by path; can fail a path N times. */
export class CallbackReceiver {
  readonly received: Received[] = [];
  private readonly failures = new Map<string, number>();
  private readonly server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const path = req.url ?? '/';
      let json: unknown = null;
      try {
        json = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch {
        json = null;
      }
      this.received.push({ path, json });
      const left = this.failures.get(path) ?? 0;
      if (left > 0) {
        this.failures.set(path, left - 1);
        res.writeHead(500).end('fail');
      } else {
        res.writeHead(200, { 'Content-Type': 'application/json' }).end('{"ResultCode":0,"ResultDesc":"Accepted"}');
      }
    });
  });
  url = '';

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  fail(path: string, times: number): void {
    this.failures.set(path, times);
  }

  at(path: string): Received[] {
    return this.received.filter((r) => r.path === path);
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/** Polls until `check` returns a truthy value (waiting for asynchronous callbacks, not timing them). */
export async function eventually<T>(check: () => Promise<T> | T, what: string, timeoutMs = 15_000): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 40));
  }
}

export function sandboxCreds(overrides: Partial<MobilemoneyCredentials> = {}): MobilemoneyCredentials {
  return {
    env: 'sandbox',
    consumer_key: `ck_${randomBytes(6).toString('hex')}`,
    consumer_secret: `cs_${randomBytes(12).toString('hex')}`,
    passkey: SANDBOX_PASSKEY,
    shortcode: '174379',
    ...overrides,
  };
}

export function paymentInput(phone: string, callbackUrl: string, shillings = 100n): MobilemoneyPaymentInput {
  const paymentId = randomUUID();
  return {
    paymentId,
    reference: randomBytes(6).toString('hex').toUpperCase(),
    amount: { minor: shillings * 100n, currency: 'KES' },
    idempotencyKey: `pay_${paymentId}`,
    callbackUrl,
    fields: { phone },
  };
}
