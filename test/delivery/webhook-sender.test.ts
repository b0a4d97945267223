import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { sendWebhook } from '../../server/domain/delivery/webhook-sender.js';
import { WebhookReceiver } from '../support/webhook-receiver.js';

// The sender checks the address it actually connects to, so a hostname whose DNS answer changes after
// the URL was accepted (rebinding) still cannot reach a private address.

let receiver: WebhookReceiver;
beforeAll(async () => {
  receiver = await new WebhookReceiver().start();
});
afterAll(async () => receiver.stop());

const send = (url: string, allowPrivate: boolean) =>
  sendWebhook({ url, body: '{"id":"evt_1"}', headers: { 'Content-Type': 'application/json' }, timeoutMs: 2000, allowPrivate });

describe('webhook sender', () => {
  it('refuses at connect time a hostname that resolves to a private address when private URLs are not allowed', async () => {
    const port = new URL(receiver.url).port;
    const result = await send(`http://localhost:${port}/webhooks`, false);
    expect(result).toMatchObject({ ok: false, responseStatus: null });
    expect(result.error).toContain('ENOTPUBLIC');
    expect(receiver.received).toHaveLength(0);
  });

  it('refuses a non-public address literal (IPv4, IPv4-compatible or mapped IPv6) without connecting', async () => {
    const port = new URL(receiver.url).port;
    for (const host of ['127.0.0.1', '[::127.0.0.1]', '[::ffff:127.0.0.1]', '[::1]']) {
      const result = await send(`http://${host}:${port}/webhooks`, false);
      expect({ host, ok: result.ok, error: result.error }).toEqual({ host, ok: false, error: expect.stringContaining('ENOTPUBLIC') });
    }
    expect(receiver.received).toHaveLength(0);
  });

  it('delivers the exact bytes when private URLs are allowed', async () => {
    const port = new URL(receiver.url).port;
    const result = await send(`http://localhost:${port}/webhooks`, true);
    expect(result).toMatchObject({ ok: true, responseStatus: 200, error: null });
    expect(receiver.received.map((r) => r.body)).toEqual(['{"id":"evt_1"}']);
  });
});
