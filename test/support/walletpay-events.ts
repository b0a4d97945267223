import { randomUUID, sign } from 'node:crypto';
import { signedMessage } from '../../server/sandbox/walletpay/signing.js';
import type { TestService } from './service.js';

/**
 * POSTs a walletpay event to the service as the sandbox provider sends one: signed with the simulator's own
 * key (made at boot), for the merchant's `webhookId`, so it is verified — what a test then sees is what the
 * service does with a provider's genuine message.
 */
export async function sendSignedWalletpayEvent(t: TestService, webhookId: string, eventType: string, resourceType: string, resource: Record<string, unknown>) {
  const [keys] = await t.sql<{ cert_id: string; private_key_pem: string }>('SELECT cert_id, private_key_pem FROM sandbox_walletpay_keys WHERE id = 1');
  const transmissionId = randomUUID();
  const time = new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
  const body = JSON.stringify({ id: `WH-${randomUUID()}`, event_version: '1.0', create_time: time, resource_type: resourceType, event_type: eventType, resource });
  const signature = sign('sha256', Buffer.from(signedMessage(transmissionId, time, webhookId, body)), keys!.private_key_pem).toString('base64');
  return t.http.post('/v1/webhooks/walletpay').set('Content-Type', 'application/json')
    .set('Walletpay-Transmission-Id', transmissionId).set('Walletpay-Transmission-Time', time).set('Walletpay-Transmission-Sig', signature)
    .set('Walletpay-Cert-Url', `${t.baseUrl}/sandbox/walletpay/v1/notifications/certs/${keys!.cert_id}`).set('Walletpay-Auth-Algo', 'SHA256withRSA')
    .send(body);
}
