/**
 * A tiny webhook endpoint: verifies each delivery's signature with `verifyWebhook` and prints the event.
 *
 *   WEBHOOK_SECRET=whsec_… PORT=4000 npx tsx examples/webhook-receiver.ts
 *
 * Register it with PUT /v1/merchant/webhook {"webhook_url":"http://localhost:4000/webhooks"}; the
 * answer carries the whsec_ secret. Outside this repository, import from 'multi-provider-payments-sdk'.
 */
import http from 'node:http';
import { verifyWebhook, WebhookVerificationError } from '../client/index.js';

const secret = process.env.WEBHOOK_SECRET;
if (!secret) {
  console.error('Set WEBHOOK_SECRET to the whsec_ secret returned by PUT /v1/merchant/webhook');
  process.exit(1);
}
try {
  // A secret no one should sign with (the placeholder whsec_… copied as is, a truncated one) is refused here, not on the first delivery.
  verifyWebhook('{}', {}, secret);
} catch (error) {
  if (error instanceof TypeError) {
    console.error(`WEBHOOK_SECRET: ${error.message}`);
    process.exit(1);
  }
}
const port = Number(process.env.PORT ?? 4000);

// Deliveries can repeat (retries keep the X-Webhook-Id): remember which ones were handled.
// A real receiver keeps these in its database.
const handled = new Set<string>();

const server = http.createServer((req, res) => {
  if (req.method !== 'POST' || req.url !== '/webhooks') {
    res.writeHead(404).end();
    return;
  }
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    try {
      // Verify the raw bytes, before any JSON parsing.
      const event = verifyWebhook(Buffer.concat(chunks), req.headers, secret);
      // verifyWebhook refuses a delivery without X-Webhook-Id (and one whose id the signature does not cover).
      const deliveryId = String(req.headers['x-webhook-id']);
      if (!handled.has(deliveryId)) {
        handled.add(deliveryId);
        console.log(JSON.stringify({ delivery: deliveryId, event }));
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"received":true}');
    } catch (error) {
      if (!(error instanceof WebhookVerificationError)) throw error;
      console.error(`rejected delivery: ${error.reason} (${error.message})`);
      res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ error: error.reason }));
    }
  });
});

server.listen(port, () => console.log(`listening on http://localhost:${port}/webhooks`));
